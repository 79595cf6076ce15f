package symmem

import (
	"context"
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// AllToAll exchanges equal blocks, as torch's all_to_all_single without
// split sizes: in and out hold the same number of elements, a multiple of
// Size(); in's block j (len(in)/Size() bytes) goes to group rank j, and
// out's block i comes from group rank i. Out of place only: in and out
// must not overlap.
func (g *Group) AllToAll(ctx context.Context, out, in coll.Span, dt coll.DType, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.AllToAll, dt: dt, in: in, out: out}
	return g.do(ctx, c, opts)
}

// AllToAllV exchanges blocks of any size, as torch's all_to_all_single
// with split sizes: sendCounts[j] elements go to group rank j and
// recvCounts[i] come from group rank i, each packed in rank order from the
// start of in and out (which may be longer than the sums). Both slices
// hold Size() counts >= 0. What rank i sends to rank j must be what rank j
// expects from rank i: every rank checks the whole matrix before any data
// moves and a difference fails the call on every rank with ErrMismatch,
// naming both ranks and both counts. Out of place only.
func (g *Group) AllToAllV(ctx context.Context, out, in coll.Span, sendCounts, recvCounts []int64, dt coll.DType, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.AllToAll, dt: dt, in: in, out: out,
		a2a: &backend.Splits{Form: backend.SplitsHost, Send: sendCounts, Recv: recvCounts}}
	return g.do(ctx, c, opts)
}

// AllToAllVDev exchanges blocks whose sizes are in symmetric memory, as
// torch.ops.symm_mem.all_to_all_vdev (MoE dispatch and combine): splits
// holds Size() int64 counts, the elements this rank sends to each group
// rank (packed in rank order from the start of in), written before the
// call (on the GPU: on the call's stream); the call writes splitsOut,
// 2*Size() int64: the elements received from each rank, then each block's
// element offset in out (packed in rank order). in and out are capacities:
// a count below zero, or counts that would read past any rank's in or
// write past any rank's out, fail the call on every rank with ErrInvalid
// before anything is written. in, out, splits and splitsOut must be
// symmetric buffers of the group (Scope.Alloc), at the same pool offsets on
// every rank. The CPU backend reads the counts at the call.
func (g *Group) AllToAllVDev(ctx context.Context, out, in, splits, splitsOut coll.Span, dt coll.DType, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.AllToAll, dt: dt, in: in, out: out,
		a2a: &backend.Splits{Form: backend.SplitsDevice, Dev: splits, DevOut: splitsOut}}
	return g.do(ctx, c, opts)
}

// validateA2A is validate's all-to-all part: it checks the form's counts
// and spans and sets c.count (the equal form's block) or, with host
// counts, c.used (the sums).
func (g *Group) validateA2A(c *call) error {
	es, n := int64(c.dt.Size()), int64(g.Size())
	switch c.a2a.Kind() {
	case backend.SplitsEqual:
		if c.in.Len != c.out.Len {
			return fmt.Errorf("in holds %d bytes and out %d; all-to-all needs equal lengths: %w", c.in.Len, c.out.Len, ErrInvalid)
		}
		if (c.in.Len/es)%n != 0 {
			return fmt.Errorf("count %d is not divisible by the group size %d (all-to-all sends %d equal blocks; use AllToAllV for others): %w", c.in.Len/es, n, n, ErrInvalid)
		}
		c.count = c.in.Len / es / n
	case backend.SplitsHost:
		send, err := sumCounts("sendCounts", c.a2a.Send, n, c.in.Len/es)
		if err != nil {
			return err
		}
		recv, err := sumCounts("recvCounts", c.a2a.Recv, n, c.out.Len/es)
		if err != nil {
			return err
		}
		c.used = [2]int64{send * es, recv * es}
		if overlaps(coll.Span{Ptr: c.in.Ptr, Len: c.used[0]}, coll.Span{Ptr: c.out.Ptr, Len: c.used[1]}) {
			return fmt.Errorf("in and out overlap: all-to-all is out of place only (pass separate buffers): %w", ErrInvalid)
		}
		return nil
	case backend.SplitsDevice:
		for _, s := range []struct {
			name string
			sp   coll.Span
			want int64
		}{{"splits", c.a2a.Dev, n}, {"splitsOut", c.a2a.DevOut, 2 * n}} {
			if s.sp.Len != s.want*8 || s.sp.Ptr == 0 || s.sp.Ptr%8 != 0 {
				return fmt.Errorf("%s at %#x holds %d bytes; want %d int64 (%d bytes) at an 8-byte aligned address: %w",
					s.name, s.sp.Ptr, s.sp.Len, s.want, s.want*8, ErrInvalid)
			}
		}
		named := []struct {
			name string
			sp   coll.Span
		}{{"in", c.in}, {"out", c.out}, {"splits", c.a2a.Dev}, {"splitsOut", c.a2a.DevOut}}
		for i, a := range named {
			for _, b := range named[i+1:] {
				if overlaps(a.sp, b.sp) && (a.name != "in" || b.name != "splits") {
					return fmt.Errorf("%s and %s overlap: the call writes out and splitsOut, which must not overlap the other buffers (only in and splits may): %w", a.name, b.name, ErrInvalid)
				}
			}
		}
		return nil
	default:
		return fmt.Errorf("unknown all-to-all form %v: %w", c.a2a.Kind(), ErrInvalid)
	}
	if overlaps(c.in, c.out) {
		return fmt.Errorf("in and out overlap: all-to-all is out of place only (pass separate buffers): %w", ErrInvalid)
	}
	return nil
}

// sumCounts checks one rank's host split counts (n of them, >= 0, summing
// to at most capacity elements) and returns their sum.
func sumCounts(name string, counts []int64, n, capacity int64) (int64, error) {
	if int64(len(counts)) != n {
		return 0, fmt.Errorf("%s holds %d counts; want one per group rank (%d): %w", name, len(counts), n, ErrInvalid)
	}
	var sum int64
	for j, k := range counts {
		if k < 0 {
			return 0, fmt.Errorf("%s[%d] is %d; counts are elements, >= 0: %w", name, j, k, ErrInvalid)
		}
		if k > math.MaxInt64-sum {
			return 0, fmt.Errorf("%s overflows int64 at [%d]: %w", name, j, ErrInvalid)
		}
		sum += k
	}
	if sum > capacity {
		buf := "in"
		if name == "recvCounts" {
			buf = "out"
		}
		return 0, fmt.Errorf("%s sum to %d elements, but %s holds %d: %w", name, sum, buf, capacity, ErrInvalid)
	}
	return sum, nil
}

// stagedA2A is staged for all-to-all: every round moves up to per elements
// of each block through two regions of the staging buffer, in (the blocks
// to send, packed) and out (the blocks received) at n*per elements, the same
// offsets on every rank. With host counts the rounds run until the largest
// count of any rank, which one all-reduce (max) finds first.
func (g *Group) stagedA2A(ctx context.Context, bg backend.Group, req backend.Request, st backend.Sym) (coll.Path, error) {
	c := struct {
		count   int64
		a2a     *backend.Splits
		in, out coll.Span
	}{req.Count, req.A2A, req.In, req.Out}
	es, n := int64(req.DType.Size()), int64(g.Size())
	per := g.stagedPer(req.Kind, req.DType)
	if per == 0 {
		return coll.Path{}, fmt.Errorf("the %d-byte staging buffer is too small for one %v element per rank and direction: %w",
			g.staging.Len, req.DType, ErrInvalid)
	}
	stage := hostmem.Bytes(g.staging.Ptr, int(g.staging.Len))
	span := func(off, bytes int64) (coll.Span, backend.Sym) {
		return coll.Span{Ptr: g.staging.Ptr + uint64(off), Len: bytes},
			backend.Sym{OK: true, Seg: st.Seg, Off: st.Off + off}
	}
	var user struct{ in, out []byte }
	if c.in.Len > 0 {
		user.in = hostmem.Bytes(c.in.Ptr, int(c.in.Len))
	}
	if c.out.Len > 0 {
		user.out = hostmem.Bytes(c.out.Ptr, int(c.out.Len))
	}
	outAt := n * per * es // the out region
	// The blocks as [start, length) in elements, in each user buffer.
	send, recv := make([][2]int64, n), make([][2]int64, n)
	total := c.count // the largest block of any rank and direction
	if c.a2a.Kind() == backend.SplitsEqual {
		for j := range n {
			send[j], recv[j] = [2]int64{j * c.count, c.count}, [2]int64{j * c.count, c.count}
		}
	} else {
		var s, r int64
		for j := range n {
			send[j], recv[j] = [2]int64{s, c.a2a.Send[j]}, [2]int64{r, c.a2a.Recv[j]}
			s, r = s+c.a2a.Send[j], r+c.a2a.Recv[j]
			total = max(total, c.a2a.Send[j], c.a2a.Recv[j])
		}
		m, ms := span(0, 8)
		word := hostmem.Uint64At(m.Ptr)
		*word = uint64(total)
		ar := backend.Request{Kind: coll.AllReduce, DType: coll.Int64, Op: coll.Max, Count: 1, In: m, Out: m, InSym: ms, OutSym: ms,
			InPlace: true, Algo: req.Algo, Record: req.Record}
		if _, err := bg.Run(ctx, ar); err != nil {
			return coll.Path{}, fmt.Errorf("staged: agreeing on the largest count: %w", err)
		}
		total = int64(*word)
	}
	rounds := 0
	var path coll.Path
	var window backend.Splits // the rounds' split counts: req's, clipped to [lo, hi)
	if c.a2a != nil {
		window = *c.a2a
	}
	for lo := int64(0); lo < total; lo += per {
		hi := min(lo+per, total)
		clip := func(b [2]int64) int64 { return min(max(b[1]-lo, 0), hi-lo) }
		r := req
		var ib, ob int64 // bytes packed into the in and out regions
		for j := range n {
			if k := clip(send[j]) * es; k > 0 {
				copy(stage[ib:ib+k], user.in[(send[j][0]+lo)*es:])
				ib += k
			}
			ob += clip(recv[j]) * es
		}
		r.In, r.InSym = span(0, ib)
		r.Out, r.OutSym = span(outAt, ob)
		if c.a2a.Kind() == backend.SplitsEqual {
			r.Count = hi - lo
		} else {
			window.Lo, window.Hi = lo, hi
			r.A2A = &window
		}
		p, err := bg.Run(ctx, r)
		if err != nil {
			return p, fmt.Errorf("staged round %d: %w", rounds, err)
		}
		path = p
		ob = outAt
		for j := range n {
			if k := clip(recv[j]) * es; k > 0 {
				copy(user.out[(recv[j][0]+lo)*es:][:k], stage[ob:ob+k])
				ob += k
			}
		}
		rounds++
	}
	path.Staged = true
	path.Reason = fmt.Sprintf("buffers are not symmetric blocks registered with group %q: staged through its %d-byte symmetric buffer in %d round(s)",
		g.name, g.staging.Len, rounds)
	return path, nil
}
