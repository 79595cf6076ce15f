package symmem

import (
	"context"
	"fmt"
	"testing"

	"github.com/symmem/symmem/coll"
)

func init() {
	roles["straddle-freed"] = roleStraddleFreed
}

// TestStraddleFreed: a collective whose output span starts in a live block
// and runs on into a freed block fails with ErrFreed, as one starting in
// the freed block does (only the first byte was checked: the staged path
// wrote into memory a later Alloc hands out; found by review).
func TestStraddleFreed(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "straddle-freed"))
}

func roleStraddleFreed(ctx context.Context) error {
	o := testOptions()
	o.Checked = false
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	if b.out.Ptr != b.in.End() {
		return fmt.Errorf("setup: blocks not adjacent (%#x, %#x)", b.in.Ptr, b.out.Ptr)
	}
	if err := w.Free(b.out); err != nil {
		return err
	}
	// [in, in+8192): its first half is live, its second half was freed.
	span := coll.Span{Ptr: b.in.Ptr, Len: 8192}
	_, err = g.AllReduce(ctx, span, span, coll.Float32, coll.Sum)
	if e := expectErr("AllReduce on a span running into a freed block", err, ErrFreed); e != nil {
		return e
	}
	return nil
}
