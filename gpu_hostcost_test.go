package symmem

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// TestGPUHostCostPaths prints the host time of one collective per forced
// GPU path (bursts of 4 calls right after a synchronisation, median and p90
// of 200 bursts): the in-band checks must not make the issue path dearer,
// and ll's stays within 1 us of a bare launch (cudadrv's TestLaunchCost,
// timed the same way).
// It uses the user API only, so the same file builds against older trees
// for side-by-side runs.
func TestGPUHostCostPaths(t *testing.T) {
	_, env := gpuRanks(t)
	res := spawn(t, 2, "gpucostpaths", env...)
	for r, rr := range res {
		t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
	}
	expectOK(t, res)
}

func init() { roles["gpucostpaths"] = roleGPUCostPaths }

func roleGPUCostPaths(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n := int64(w.Size())
	for _, size := range []int64{64 << 10, 4 << 20} {
		bufs, err := gpuAlloc(ctx, g, size, size)
		if err != nil {
			return err
		}
		out, in := bufs[0], bufs[1]
		slice := size / n
		mine := coll.Span{Ptr: out.Ptr + uint64(int64(g.Rank())*slice), Len: slice}
		for _, c := range []struct {
			kind coll.Kind
			algo coll.Algo
		}{{coll.AllGather, coll.AlgoKernel}, {coll.AllGather, coll.AlgoCE}, {coll.ReduceScatter, coll.AlgoLowContention}, {coll.ReduceScatter, coll.AlgoKernel},
			{coll.AllGather, coll.AlgoLL}, {coll.ReduceScatter, coll.AlgoLL}} {
			if c.algo == coll.AlgoLL && slice > 64<<10 {
				continue // above ll's area (its refusal says so)
			}
			call := func() (coll.Path, error) {
				if c.kind == coll.AllGather {
					return g.AllGather(ctx, out.Span, mine, coll.BFloat16, WithAlgo(c.algo))
				}
				return g.ReduceScatter(ctx, coll.Span{Ptr: out.Ptr, Len: slice}, in.Span, coll.BFloat16, coll.Sum, WithAlgo(c.algo))
			}
			if _, err := call(); err != nil { // first use: lc's staging, registration
				return fmt.Errorf("%v %s: %w", c.kind, c.algo, err)
			}
			per, err := hostBursts(ctx, w, g, func() error { _, err := call(); return err })
			if err != nil {
				return err
			}
			fmt.Printf("HOSTCOST %v %-6s %8d bytes: median %.2f us, p90 %.2f us per call (rank %d)\n", c.kind, c.algo, size, per[len(per)/2], per[len(per)*9/10], w.Rank())
		}
		if err := w.Free(out); err != nil {
			return err
		}
		if err := w.Free(in); err != nil {
			return err
		}
	}
	return nil
}

// hostBursts times call in 200 bursts of 4 calls, each right after a
// synchronisation and a barrier (so the GPU's queue never blocks the
// caller), and returns the per-call microseconds of each burst, sorted.
func hostBursts(ctx context.Context, w *World, g *Group, call func() error) ([]float64, error) {
	var per []float64
	for round := 0; round < 200; round++ {
		if err := w.Synchronize(ctx); err != nil {
			return nil, err
		}
		if err := g.Barrier(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for i := 0; i < 4; i++ {
			if err := call(); err != nil {
				return nil, err
			}
		}
		per = append(per, time.Since(t0).Seconds()*1e6/4)
	}
	if err := w.Synchronize(ctx); err != nil {
		return nil, err
	}
	slices.Sort(per)
	return per, nil
}
