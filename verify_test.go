package symmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// Always-on verification (no Options.Checked): mismatched allocations and
// mismatched collective arguments are errors on every rank, promptly, before
// any rank moves data; use after free is an error.

func init() {
	roles["alloc-order"] = roleAllocOrder
	roles["scope-sizes"] = roleScopeSizes
	roles["arg-mismatch"] = roleArgMismatch
	roles["freed"] = roleFreed
}

// TestAllocOrderMismatch: ranks allocate the same two sizes in a different
// order inside a scope that creates no segment; End fails on both ranks.
func TestAllocOrderMismatch(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "alloc-order"))
}

// TestScopeSizesMismatch: one rank allocates 2 MiB (fits the existing
// segment), the other 16 MiB (needs a new segment): both Ends fail at once.
func TestScopeSizesMismatch(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "scope-sizes"))
}

// TestArgMismatch: collectives whose arguments differ across ranks (count,
// dtype, op, root, in-place-ness, buffer offsets, kind) fail on every rank
// with ErrMismatch naming the argument and both values; matching calls
// afterwards still work.
func TestArgMismatch(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 3, "arg-mismatch"))
}

// TestUseAfterFree: a freed buffer is refused by every collective and by
// Free, and Bytes of it returns nil.
func TestUseAfterFree(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "freed"))
}

func expectMismatch(what string, err error, words ...string) error {
	if err == nil {
		return fmt.Errorf("%s: no error", what)
	}
	if !errors.Is(err, ErrMismatch) { // pool.ErrMismatch is the same value
		return fmt.Errorf("%s: error %q is not a mismatch", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			return fmt.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
	return nil
}

func roleAllocOrder(ctx context.Context) error {
	o := testOptions()
	o.Checked = false
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	sizes := []int64{256, 512}
	if w.Rank() == 1 {
		sizes[0], sizes[1] = sizes[1], sizes[0]
	}
	var bs []Buffer
	for _, s := range sizes {
		b, err := sc.Alloc(s)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	start := time.Now()
	err = sc.End(ctx)
	fmt.Println(err)
	if err := expectMismatch("End after Allocs in a different order", err, "rank 1", "Alloc(512"); err != nil {
		return err
	}
	if d := time.Since(start); d > 5*time.Second {
		return fmt.Errorf("End took %v", d)
	}
	// Had End passed, this all-reduce would mix the ranks' different
	// buffers (the 1 and 0 / 0 and 2 instead of 3): the second
	// buffer lies at offset +256 on rank 0 and +512 on rank 1.
	one := coll.Span{Ptr: bs[1].Ptr, Len: 4}
	_, err = g.AllReduce(ctx, one, one, coll.Float32, coll.Sum)
	return expectMismatch("AllReduce on buffers at different offsets", err, "offset")
}

func roleScopeSizes(ctx context.Context) error {
	o := testOptions()
	o.Checked = false
	o.Timeout = 10 * time.Second
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	sc, err := w.World().OpenScope()
	if err != nil {
		return err
	}
	size := int64(2 << 20) // fits the first 8 MiB segment
	if w.Rank() == 1 {
		size = 16 << 20 // a new segment
	}
	if _, err := sc.Alloc(size); err != nil {
		return err
	}
	start := time.Now()
	err = sc.End(ctx)
	fmt.Println(err)
	if err := expectMismatch("End after Allocs of different sizes", err, "rank 1"); err != nil {
		return err
	}
	if d := time.Since(start); d > 2*time.Second {
		return fmt.Errorf("End took %v to fail (want at once, the timeout is %v)", d, o.Timeout)
	}
	return nil
}

func roleArgMismatch(ctx context.Context) error {
	o := testOptions()
	o.Checked = false
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 1<<16)
	if err != nil {
		return err
	}
	me, n := g.Rank(), int64(g.Size())
	sp := func(x Buffer, off, bytes int64) coll.Span { return coll.Span{Ptr: x.Ptr + uint64(off), Len: bytes} }
	odd := me == 2 // the rank that differs
	pick := func(a, b int64) int64 {
		if odd {
			return b
		}
		return a
	}
	cases := []struct {
		what  string
		run   func() error
		words []string
	}{
		{"count", func() error {
			c := pick(64, 32) * 4
			_, err := g.AllReduce(ctx, sp(b.out, 0, c), sp(b.in, 0, c), coll.Float32, coll.Sum)
			return err
		}, []string{"rank 2", "count", "64", "32"}},
		{"dtype", func() error {
			dt := coll.Float32
			if odd {
				dt = coll.Int32
			}
			_, err := g.AllReduce(ctx, sp(b.out, 0, 256), sp(b.in, 0, 256), dt, coll.Sum)
			return err
		}, []string{"rank 2", "dtype", "float32", "int32"}},
		{"op", func() error {
			op := coll.Sum
			if odd {
				op = coll.Max
			}
			_, err := g.ReduceScatter(ctx, sp(b.out, 0, 64), sp(b.in, 0, 64*n), coll.Float32, op)
			return err
		}, []string{"rank 2", "op", "sum", "max"}},
		{"root", func() error {
			_, err := g.Broadcast(ctx, sp(b.out, 0, 256), int(pick(0, 1)), coll.Float32)
			return err
		}, []string{"rank 2", "root", "0", "1"}},
		{"offset", func() error {
			_, err := g.AllGather(ctx, sp(b.out, 0, 64*n), sp(b.in, pick(0, 256), 64), coll.Float32)
			return err
		}, []string{"rank 2", "in", "offset"}},
		{"in-place", func() error {
			in := sp(b.in, 0, 256)
			if odd {
				in = sp(b.out, 0, 256)
			}
			_, err := g.AllReduce(ctx, sp(b.out, 0, 256), in, coll.Float32, coll.Sum)
			return err
		}, []string{"rank 2", "in-place"}},
		{"kind", func() error {
			var err error
			if odd {
				_, err = g.Broadcast(ctx, sp(b.out, 0, 256), 0, coll.Float32)
			} else {
				_, err = g.AllReduce(ctx, sp(b.out, 0, 256), sp(b.in, 0, 256), coll.Float32, coll.Sum)
			}
			return err
		}, []string{"rank 2", "all_reduce", "broadcast"}},
		{"empty", func() error {
			c := pick(64, 0) * 4
			_, err := g.AllReduce(ctx, sp(b.out, 0, c), sp(b.in, 0, c), coll.Float32, coll.Sum)
			return err
		}, []string{"rank 2", "count"}},
	}
	for _, c := range cases {
		start := time.Now()
		err := c.run()
		if me == 0 {
			fmt.Println(err)
		}
		if err := expectMismatch(c.what+" differs", err, c.words...); err != nil {
			return err
		}
		if d := time.Since(start); d > 2*time.Second {
			return fmt.Errorf("%s: mismatch reported after %v", c.what, d)
		}
		// The group is still usable: a matching call works and is right.
		if err := runCase(ctx, g, coll.AllReduce, coll.Float32, coll.Sum, "sym", 100, b, 7); err != nil {
			return fmt.Errorf("after the %s mismatch: %w", c.what, err)
		}
	}
	return nil
}

func roleFreed(ctx context.Context) error {
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
	if err := w.Free(b.in); err != nil {
		return err
	}
	if got := b.in.Bytes(); got != nil {
		return fmt.Errorf("Bytes of a freed buffer returned %d bytes", len(got))
	}
	_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	if err := expectErr("AllReduce on a freed buffer", err, ErrFreed, "freed"); err != nil {
		return err
	}
	if err := expectErr("second Free", w.Free(b.in), ErrFreed); err != nil {
		return err
	}
	// A new allocation may take the freed block's place: the old Buffer
	// still refuses, the new one works.
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	nb, err := sc.Alloc(4096)
	if err != nil {
		return err
	}
	if err := sc.End(ctx); err != nil {
		return err
	}
	if nb.Ptr == b.in.Ptr && b.in.Bytes() != nil {
		return errors.New("the freed buffer's Bytes aliases the new allocation")
	}
	// Freeing the old Buffer again must not free the new allocation.
	if err := expectErr("Free of the old buffer after reuse", w.Free(b.in), ErrFreed); err != nil {
		return err
	}
	if nb.Bytes() == nil {
		return errors.New("the new buffer's Bytes is nil")
	}
	_, err = g.AllReduce(ctx, b.out.Span, nb.Span, coll.Float32, coll.Sum)
	return err
}
