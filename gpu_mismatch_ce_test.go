package symmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// The copy-engine paths' in-band check (internal/backend/cuda/handshake.go):
// a rank that passes other arguments than its peers stops the device on
// every rank before any copy runs, and every rank reports ErrMismatch saying
// the context is lost. Each algorithm runs in fresh processes (the check
// ends their contexts). "mixed": the same arguments, but rank 0 forces the
// all-gather kernel and the others copy engines — rank 0's kernel skips
// (its context lives), the others stop, all within about a second. "nccl":
// the handshake in front of NCCL stops the device instead of NCCL hanging
// (skipped where NCCL is unavailable, e.g. ranks sharing a GPU).

func init() { roles["gpucemismatch"] = roleGPUCopyEngineMismatch }

func TestGPUCopyEngineMismatch(t *testing.T) {
	for _, algo := range []coll.Algo{coll.AlgoCE, coll.AlgoLowContention, "mixed", coll.AlgoNCCL} {
		t.Run(string(algo), func(t *testing.T) {
			n, env := gpuRanks(t)
			res := spawn(t, n, "gpucemismatch", append(env, "SYMMEM_TEST_CE_ALGO="+string(algo))...)
			for r, rr := range res {
				t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
			}
			expectOK(t, res)
		})
	}
}

func roleGPUCopyEngineMismatch(ctx context.Context) error {
	algo := coll.Algo(os.Getenv("SYMMEM_TEST_CE_ALGO"))
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n, me := int64(g.Size()), int64(g.Rank())
	const slice = 1 << 20 // bytes per rank
	bufs, err := gpuAlloc(ctx, g, slice*n, slice*n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	count := int64(slice / 4)
	mixed := algo == "mixed"
	switch {
	case mixed:
		algo = coll.AlgoCE
	case me > 0:
		count /= 4 // a quarter of the count: the copies would move other bytes
	}
	call := func(count int64) (coll.Path, error) {
		if algo == coll.AlgoCE || algo == coll.AlgoKernel || algo == coll.AlgoNCCL {
			return g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count * n}, coll.Span{Ptr: in.Ptr, Len: 4 * count}, coll.Float32, WithAlgo(algo))
		}
		return g.ReduceScatter(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count}, coll.Span{Ptr: in.Ptr, Len: 4 * count * n}, coll.Float32, coll.Sum, WithAlgo(algo))
	}
	// A matching call first: the path runs (and lc's staging exists).
	if p, err := call(slice / 4); algo == coll.AlgoNCCL && errors.Is(err, ErrNotSupported) {
		fmt.Printf("GPU mismatch nccl: skipped, NCCL unavailable: %v\n", err)
		return nil
	} else if err != nil || p.Algo != algo {
		return fmt.Errorf("matching %s call: path %v, %w", algo, p, err)
	}
	if err := w.Synchronize(ctx); err != nil {
		return fmt.Errorf("matching %s call: %w", algo, err)
	}
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	if mixed && me == 0 {
		algo = coll.AlgoKernel
	}
	start := time.Now()
	// The call itself may already report (its handshake can end before
	// the host looks); Synchronize reports in any case.
	if _, err := call(count); err != nil && !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("mismatched %s call: %w", algo, err)
	}
	serr := w.Synchronize(ctx)
	took := time.Since(start)
	if mixed && algo == coll.AlgoKernel { // the kernel skipped: reported once, the context lives
		if !errors.Is(serr, ErrMismatch) || strings.Contains(serr.Error(), "context is lost") || took > 5*time.Second {
			return fmt.Errorf("mixed, kernel rank: Synchronize returned %v after %v, want ErrMismatch (context alive) within seconds", serr, took)
		}
		fmt.Printf("GPU mismatch (path) kernel vs ce, kernel rank: reported after %v: %v\n", took.Round(time.Millisecond), serr)
		return nil
	}
	if !errors.Is(serr, ErrMismatch) || !strings.Contains(serr.Error(), "context is lost") || took > 5*time.Second {
		return fmt.Errorf("%s (mixed %v): Synchronize returned %v after %v, want ErrMismatch saying the context is lost, within seconds", algo, mixed, serr, took)
	}
	fmt.Printf("GPU mismatch (mixed %v) %-3s: stopped the device after %v: %v\n", mixed, algo, took.Round(time.Millisecond), serr)
	// The group stays broken, saying why.
	if _, err := call(slice / 4); !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("%s: a call after the stop returned %v, want the mismatch again", algo, err)
	}
	return nil
}
