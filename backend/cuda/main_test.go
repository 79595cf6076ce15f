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

// GPU tests run as ranks of a job. Under `symmem launch -n 2` (RANK is set)
// every process runs them directly. Otherwise the test spawns two copies of
// this binary as ranks 0 and 1 (one GPU each) and checks they pass.

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

// asRanks runs body as one rank of a 2-rank job: directly when this process
// is a rank (launcher or spawned child), else by spawning two ranks.
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
	needGPUs(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	token, job := rendezvous.NewToken(), rendezvous.NewJobID()
	const n = 2
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
