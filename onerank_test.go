package symmem

import (
	"context"
	"testing"

	"github.com/symmem/symmem/coll"
)

func init() { roles["one-rank"] = roleOneRank }

// TestOneRank: all four collectives work in a world of one rank, out of
// place, in place and staged, small (one-shot) and large.
func TestOneRank(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 1, "one-rank"))
}

func roleOneRank(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 1<<20)
	if err != nil {
		return err
	}
	id := uint64(1)
	for _, count := range []int{1, 300, 20000} {
		for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
			for _, mode := range []string{"sym", "inplace", "staged"} {
				if k == coll.Broadcast && mode == "inplace" {
					continue
				}
				id++
				if err := runCase(ctx, g, k, coll.Float32, coll.Sum, mode, count, b, id); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
