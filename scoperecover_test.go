package symmem

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

func init() { roles["scoperecover"] = roleScopeRecover }

// TestScopeEndRecovers: a Scope.End that finds different allocations fails
// on both ranks, naming rank 1 and saying that nothing was registered.
// Once each rank frees what it allocated there, scope ends, NewGroup and
// collectives work again. A difference that created a segment on one rank
// only cannot be undone: every later scope end says to create the world
// again, and Close still works. Where a rank frees only part of what
// differed ("partial"), the next scope end names the block that still
// differs, not the Frees just made (the log since the failed end starts
// with them, and their sizes differ too).
func TestScopeEndRecovers(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"size", "segment", "partial"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			expectOK(t, spawn(t, 2, "scoperecover", "TEST_RECOVER_CASE="+c))
		})
	}
}

func roleScopeRecover(ctx context.Context) error {
	recovers := os.Getenv("TEST_RECOVER_CASE") != "segment"
	partial := os.Getenv("TEST_RECOVER_CASE") == "partial"
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	g := w.World()
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	size := int64(4096)
	if w.Rank() == 1 {
		size = 8192
		if !recovers {
			size = 2 * testOptions().Pool.MinSegment // a segment rank 0 does not create
		}
	}
	bad, err := sc.Alloc(size)
	if err != nil {
		return err
	}
	var bad2 Buffer
	if partial {
		if bad2, err = sc.Alloc(512 + 256*int64(w.Rank())); err != nil {
			return err
		}
	}
	err = sc.End(ctx)
	fmt.Printf("first End: %v\n", err)
	if err := expectErr("End with different sizes", err, ErrMismatch, "rank 1", "nothing was registered"); err != nil {
		return err
	}
	if err := w.Free(bad); err != nil {
		return err
	}
	if partial {
		sc, err := g.OpenScope()
		if err != nil {
			return err
		}
		err = sc.End(ctx)
		fmt.Printf("End after freeing part: %v\n", err)
		if err := expectErr("End after freeing part of what differed", err, ErrMismatch, "still differ", "first differing live block", "Alloc(512,"); err != nil {
			return err
		}
		if strings.Contains(err.Error(), "Free(") {
			return fmt.Errorf("End after freeing part of what differed names a Free: %v", err)
		}
		if err := w.Free(bad2); err != nil {
			return err
		}
	}
	b, err := allocBufs(ctx, g, 1<<16)
	fmt.Printf("End after Free: %v\n", err)
	if !recovers {
		if err := expectErr("End after the extra segment", err, ErrMismatch, "create it again"); err != nil {
			return err
		}
		_, err = w.NewGroup(ctx, "after", []int{0, 1})
		if err := expectErr("NewGroup after the extra segment", err, ErrMismatch, "create it again"); err != nil {
			return err
		}
		return w.Close()
	}
	if err != nil {
		return fmt.Errorf("End after freeing what differed: %w", err)
	}
	if err := runCase(ctx, g, coll.AllReduce, coll.Float32, coll.Sum, "sym", 1000, b, 5); err != nil {
		return err
	}
	sub, err := w.NewGroup(ctx, "after", []int{0, 1})
	if err != nil {
		return fmt.Errorf("NewGroup after freeing what differed: %w", err)
	}
	sb, err := allocBufs(ctx, sub, 1<<12)
	if err != nil {
		return err
	}
	if err := runCase(ctx, sub, coll.AllGather, coll.Int32, coll.Sum, "sym", 64, sb, 6); err != nil {
		return err
	}
	return w.Close()
}
