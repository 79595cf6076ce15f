package symmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
)

func init() {
	roles["memory-errors"] = roleMemoryErrors
	roles["bytes-after-failed-close"] = roleBytesAfterFailedClose
}

// TestMemoryErrors: bad memory calls are errors wrapping the documented
// sentinels, never a crash. Before: the pool's errors (a size of 0, a Free
// of no buffer, a scope ended out of order or twice, the cap) wrapped none
// of them; AllocLocal of a huge size panicked (makeslice) or killed the
// process (runtime: out of memory); a staged call on a span running past
// the end of its pool segment died of SIGSEGV (and one that ran there
// through free space in the segment was ErrFreed, "used after
// World.Free?"); Scope.End after World.Close was ErrGroupClosed, not
// ErrClosed.
func TestMemoryErrors(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "memory-errors"))
}

func roleMemoryErrors(ctx context.Context) error {
	o := testOptions()
	o.Pool.Cap = 16 << 20 // two 8 MiB segments
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	alloc := func(n int64) func() error {
		return func() error { _, err := w.Alloc(n); return err }
	}
	local := func(n int64) func() error {
		return func() error { _, err := w.AllocLocal(n); return err }
	}
	// The last 64 KiB of the first segment (the staging buffer is its first
	// 64 KiB): a span twice as long runs past the segment's end.
	last, err := w.Alloc(8<<20 - 2*o.StagingBytes)
	if err != nil {
		return err
	}
	end, err := w.Alloc(o.StagingBytes)
	if err != nil {
		return err
	}
	if loc, _ := w.pool.Lookup(end.Ptr); loc.Off+end.Len != loc.Segment.Size {
		return fmt.Errorf("setup: buffer at offset %d of %d bytes does not end its segment", loc.Off, loc.Segment.Size)
	}
	past := coll.Span{Ptr: end.Ptr, Len: 2 * end.Len}
	// A small buffer alone in the second segment: a span from it to 4 KiB
	// past the segment's end runs through never-allocated memory.
	small, err := w.Alloc(4096)
	if err != nil {
		return err
	}
	sloc, _ := w.pool.Lookup(small.Ptr)
	long := coll.Span{Ptr: small.Ptr, Len: sloc.Segment.Size - sloc.Off + 4096}
	outer, _ := g.OpenScope()
	inner, _ := g.OpenScope()
	tests := []struct {
		name  string
		call  func() error
		want  error
		words []string
	}{
		{"Alloc(0)", alloc(0), ErrInvalid, nil},
		{"Alloc(-1)", alloc(-1), ErrInvalid, nil},
		{"Alloc(MaxAlloc+1)", alloc(pool.MaxAlloc + 1), ErrInvalid, nil},
		{"Alloc over the cap", alloc(9 << 20), ErrNoMemory, []string{"cap"}},
		{"Free(Buffer{})", func() error { return w.Free(Buffer{}) }, ErrInvalid, nil},
		{"AllocLocal(2^62)", local(1 << 62), ErrInvalid, nil},
		{"AllocLocal(2^47)", local(1 << 47), ErrNoMemory, []string{"available"}},
		{"outer scope ended first", func() error { return outer.End(ctx) }, ErrInvalid, []string{"inner"}},
		{"inner scope ended", func() error { return inner.End(ctx) }, nil, nil},
		{"outer scope ended", func() error { return outer.End(ctx) }, nil, nil},
		{"scope ended twice", func() error { return outer.End(ctx) }, ErrInvalid, []string{"twice"}},
		{"all-reduce past the segment's end", func() error {
			_, err := g.AllReduce(ctx, past, past, coll.Float32, coll.Sum)
			return err
		}, ErrInvalid, []string{"past the end"}},
		{"all-reduce past the end of a segment with free space", func() error {
			_, err := g.AllReduce(ctx, long, long, coll.Float32, coll.Sum)
			return err
		}, ErrInvalid, []string{"past the end", "longer than its buffer"}},
		{"all-gather into a span past the segment's end", func() error {
			in := coll.Span{Ptr: last.Ptr, Len: end.Len}
			_, err := g.AllGather(ctx, coll.Span{Ptr: end.Ptr, Len: 2 * end.Len}, in, coll.Float32)
			return err
		}, ErrInvalid, []string{"past the end"}},
	}
	var errs []error
	for _, tc := range tests {
		err := tc.call()
		if tc.want == nil {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", tc.name, err))
			}
			continue
		}
		if e := expectErr(tc.name, err, tc.want, tc.words...); e != nil {
			errs = append(errs, e)
		}
	}
	// The group still works.
	if _, err := g.AllReduce(ctx, end.Span, end.Span, coll.Float32, coll.Sum); err != nil {
		errs = append(errs, fmt.Errorf("all-reduce after the errors: %w", err))
	}
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	w.Close()
	if e := expectErr("Scope.End after World.Close", sc.End(ctx), ErrClosed); e != nil {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// TestBytesAfterFailedClose: Buffer.Bytes after a World.Close that could
// not take the groups down with a peer (it exited) is nil. Before, the
// pool stayed open while Close unmapped the segments: Bytes returned the
// unmapped memory and the first write died of SIGSEGV.
func TestBytesAfterFailedClose(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "bytes-after-failed-close", "GORACE=atexit_sleep_ms=0"))
}

func roleBytesAfterFailedClose(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	b, err := allocBufs(ctx, w.World(), 4096)
	if err != nil {
		return err
	}
	if err := w.World().Barrier(ctx); err != nil {
		return err
	}
	if w.Rank() == 1 {
		os.Exit(0) // without Close
	}
	time.Sleep(200 * time.Millisecond)
	if err := expectErr("Close after rank 1 exited", w.Close(), ErrPeerExited); err != nil {
		return err
	}
	if x := b.in.Bytes(); x != nil {
		x[0] = 1 // SIGSEGV where the memory is unmapped
		return fmt.Errorf("Bytes after Close returned %d bytes", len(x))
	}
	if err := w.Free(b.in); !errors.Is(err, ErrClosed) {
		return fmt.Errorf("Free after Close: %v, want ErrClosed", err)
	}
	if s := w.World(); s.IsSymmetric(b.in.Span) {
		return fmt.Errorf("IsSymmetric after Close")
	}
	return nil
}
