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

// The handshake beside copy-engine and NCCL calls in checked mode
// (internal/backend/cuda/handshake.go): the ranks pass the same arguments
// (checked mode's store exchange agrees) but rank 0 forces symmem's kernel
// while the others force the path under test. Rank 0's kernel meets their
// handshake in the kernels' shared region, skips and reports (its context
// lives); the others' handshakes trap, so no copy engine waits forever for
// a peer that never comes, and they report ErrMismatch saying the context
// is lost — all within seconds. Each path runs in fresh processes (the
// check ends their contexts); nccl skips where NCCL is unavailable (ranks
// sharing a GPU).

func init() { roles["gpucemismatch"] = roleGPUCopyEngineMismatch }

func TestGPUCopyEngineMismatch(t *testing.T) {
	for _, algo := range []coll.Algo{coll.AlgoCE, coll.AlgoLowContention, coll.AlgoNCCL} {
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
	w, err := gpuWorld(ctx, Options{Checked: true})
	if err != nil {
		return err
	}
	defer func() { // Close is bounded; how long it takes after a stop is part of the story
		t0 := time.Now()
		err := w.Close()
		fmt.Printf("GPU handshake %s: Close took %v: %v\n", algo, time.Since(t0).Round(time.Millisecond), err)
	}()
	g := w.World()
	n, me := int64(g.Size()), int64(g.Rank())
	const slice = 1 << 20 // bytes per rank
	bufs, err := gpuAlloc(ctx, g, slice*n, slice*n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	count := int64(slice / 4)
	rs := algo == coll.AlgoLowContention // lc serves reduce-scatter; the others all-gather
	call := func(algo coll.Algo) (coll.Path, error) {
		if rs {
			return g.ReduceScatter(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count}, coll.Span{Ptr: in.Ptr, Len: 4 * count * n}, coll.Float32, coll.Sum, WithAlgo(algo))
		}
		return g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count * n}, coll.Span{Ptr: in.Ptr, Len: 4 * count}, coll.Float32, WithAlgo(algo))
	}
	// Matching calls first: the handshake passes (and lc's staging exists).
	if p, err := call(algo); algo == coll.AlgoNCCL && errors.Is(err, ErrNotSupported) {
		fmt.Printf("GPU handshake nccl: skipped, NCCL unavailable: %v\n", err)
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
	mine := algo
	if me == 0 {
		mine = coll.AlgoKernel
	}
	start := time.Now()
	// The call itself may already report (the check can end before the
	// host looks); Synchronize reports in any case.
	if _, err := call(mine); err != nil && !errors.Is(err, ErrMismatch) {
		return fmt.Errorf("%s call beside rank 0's kernel: %w", mine, err)
	}
	serr := w.Synchronize(ctx)
	took := time.Since(start)
	named := fmt.Sprintf("on %s", algo)
	if !errors.Is(serr, ErrMismatch) || !strings.Contains(serr.Error(), named) || !strings.Contains(serr.Error(), "on kernel") || took > 5*time.Second {
		return fmt.Errorf("%s vs kernel: Synchronize returned %v after %v, want ErrMismatch naming both paths within seconds", mine, serr, took)
	}
	if lost := strings.Contains(serr.Error(), "context is lost"); lost != (me > 0) {
		return fmt.Errorf("%s vs kernel: context lost %v on rank %d: %v", mine, lost, me, serr)
	}
	fmt.Printf("GPU handshake %-4s rank on %-6s: reported after %v: %v\n", algo, mine, took.Round(time.Millisecond), serr)
	// The stop explains every later launch failure. (Not a collective:
	// checked mode's store exchange of a call only this rank makes would
	// pair with rank 0's Close and stall it until the timeout.)
	if me > 0 {
		if err := w.Synchronize(ctx); !errors.Is(err, ErrMismatch) {
			return fmt.Errorf("%s: Synchronize after the stop returned %v, want the mismatch again", algo, err)
		}
	}
	return nil
}
