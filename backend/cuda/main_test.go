package cuda

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/rendezvous"
)

// GPU tests run as ranks of a job. Under `symmem launch -n N` (RANK is set)
// every process runs them directly. Otherwise the test spawns copies of this
// binary as the ranks and checks they pass.

const childEnv = "SYMMEM_CUDA_TEST_RANK_CHILD"

func TestMain(m *testing.M) {
	os.Setenv("NCCL_NVLS_ENABLE", "0") // never NVLink multicast on shared hosts
	os.Exit(m.Run())
}

// needGPUs skips unless the driver loads with at least n devices.
func needGPUs(t testing.TB, n int) {
	t.Helper()
	if err := cuda.Load(); err != nil {
		t.Skipf("GPU test skipped: no usable CUDA driver: %v", err)
	}
	if c, _ := cuda.DeviceCount(); c < n {
		t.Skipf("GPU test skipped: needs %d GPUs, %d visible", n, c)
	}
}

// asRanks runs body as one rank of a job: directly when this process is a
// rank (launcher or spawned child), else by spawning the ranks —
// SYMMEM_GPU_TEST_RANKS of them (default 2), one GPU each where there are
// enough GPUs, else sharing the GPUs (SYMMEM_SHARE_DEVICE=1; NCCL paths are
// then unavailable and the tests skip them).
func asRanks(t *testing.T, body func(t *testing.T, env rendezvous.Env)) {
	if os.Getenv("RANK") != "" {
		env, err := rendezvous.EnvFromOS()
		if err != nil {
			t.Fatal(err)
		}
		needGPUs(t, 1)
		body(t, env)
		return
	}
	needGPUs(t, 1)
	n := 2
	if v, err := strconv.Atoi(os.Getenv("SYMMEM_GPU_TEST_RANKS")); err == nil && v >= 1 {
		n = v
	}
	var share []string
	if c, _ := cuda.DeviceCount(); c < n {
		share = []string{rendezvous.VarShareDevice + "=1"}
		fmt.Printf("%s: %d ranks share %d GPU(s)\n", t.Name(), n, c)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	token, job := rendezvous.NewToken(), rendezvous.NewJobID()
	type res struct {
		rank int
		out  []byte
		err  error
	}
	ch := make(chan res, n)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	for r := 0; r < n; r++ {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1",
			"MASTER_PORT="+strconv.Itoa(port), "SYMMEM_TOKEN="+token, "SYMMEM_JOB_ID="+job)
		cmd.Env = append(cmd.Env, share...)
		go func(r int) {
			out, err := cmd.CombinedOutput()
			ch <- res{r, out, err}
		}(r)
	}
	for i := 0; i < n; i++ {
		x := <-ch
		fmt.Printf("---- rank %d output ----\n%s---- end of rank %d ----\n", x.rank, x.out, x.rank)
		if x.err != nil {
			t.Errorf("rank %d: %v", x.rank, x.err)
		}
	}
}

// logf prints on rank 0 only (both ranks' logs are kept by the parent).
func logf(env rendezvous.Env, format string, a ...any) {
	if env.Rank == 0 {
		fmt.Printf(format, a...)
	}
}
