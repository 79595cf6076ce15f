package symmem

import (
	"context"
	"fmt"
	"testing"

	"github.com/symmem/symmem/coll"
)

func init() { roles["call-allocs"] = roleCallAllocs }

// TestCPUCallNoAllocs: a CPU collective on symmetric buffers allocates
// nothing per call in steady state, on 2 real processes: no timer per
// call, no garbage from the backend's executor, so back-to-back calls
// never start a GC cycle (whose workers take CPUs from the copies).
func TestCPUCallNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	t.Parallel()
	expectOK(t, spawn(t, 2, "call-allocs"))
}

func roleCallAllocs(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	const bytes = 256 << 10
	b, err := allocBufs(ctx, g, bytes)
	if err != nil {
		return err
	}
	n := int64(g.Size())
	part := coll.Span{Ptr: b.in.Ptr, Len: bytes / n}
	for _, c := range []struct {
		name string
		f    func() (coll.Path, error)
	}{
		{"all_reduce", func() (coll.Path, error) { return g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum) }},
		{"all_reduce bf16 in place", func() (coll.Path, error) { return g.AllReduce(ctx, b.in.Span, b.in.Span, coll.BFloat16, coll.Sum) }},
		{"all_gather", func() (coll.Path, error) { return g.AllGather(ctx, b.out.Span, part, coll.Float32) }},
	} {
		var err error
		allocs := testing.AllocsPerRun(50, func() {
			if _, e := c.f(); e != nil && err == nil {
				err = e
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if allocs != 0 {
			return fmt.Errorf("%s: %v allocations per call, want 0", c.name, allocs)
		}
	}
	return nil
}
