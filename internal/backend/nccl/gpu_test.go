package nccl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/rendezvous"
)

// The GPU test re-executes this test binary as two child processes, one per
// GPU (RANK = LOCAL_RANK = device ordinal), which meet through a real TCP
// rendezvous store hosted by the parent. The children's logic is in
// gpu_child_test.go.

const (
	childEnv    = "SYMMEM_NCCL_TEST_CHILD"
	storeEnv    = "SYMMEM_NCCL_TEST_STORE"
	tokenEnv    = "SYMMEM_NCCL_TEST_TOKEN"
	childBudget = 90 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// gpuOrSkip skips unless NCCL, the CUDA driver and n GPUs are here.
func gpuOrSkip(t *testing.T, n int) *libnccl.Lib {
	t.Helper()
	lib, err := libnccl.Load()
	if err != nil {
		t.Skipf("GPU test skipped: %v", err)
	}
	if err := cudadrv.Load(); err != nil {
		t.Skipf("GPU test skipped: no CUDA driver: %v", err)
	}
	have, err := cudadrv.DeviceCount()
	if err != nil || have < n {
		t.Skipf("GPU test skipped: needs %d GPUs, have %d (%v)", n, have, err)
	}
	return lib
}

func TestGPUTwoRanks(t *testing.T) {
	lib := gpuOrSkip(t, 2)
	t.Logf("parent: %s", lib)
	var tok [16]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	srv, err := rendezvous.NewServer("127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), childBudget)
	defer cancel()
	const n = 2
	var outs [n]bytes.Buffer
	cmds := make([]*exec.Cmd, n)
	for r := 0; r < n; r++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "RANK="+strconv.Itoa(r), "LOCAL_RANK="+strconv.Itoa(r),
			"WORLD_SIZE="+strconv.Itoa(n), storeEnv+"="+srv.Addr(), tokenEnv+"="+token)
		if os.Getenv("NCCL_NVLS_ENABLE") == "" {
			cmd.Env = append(cmd.Env, "NCCL_NVLS_ENABLE=0")
		}
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	errs := make([]error, n)
	for r, cmd := range cmds {
		errs[r] = cmd.Wait()
	}
	for r := 0; r < n; r++ {
		for _, line := range strings.Split(strings.TrimRight(outs[r].String(), "\n"), "\n") {
			t.Logf("rank %d| %s", r, line)
		}
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d exited with %v", r, err)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("children killed after %v", childBudget)
	}
}

func runChild() int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	size, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	c := &child{rank: rank, size: size}
	err := c.run()
	if err != nil {
		fmt.Printf("FAIL rank %d: %v\n", rank, err)
		return 1
	}
	if c.failed > 0 {
		fmt.Printf("FAIL rank %d: %d checks failed\n", rank, c.failed)
		return 1
	}
	fmt.Printf("PASS rank %d: %d checks\n", rank, c.passed)
	return 0
}
