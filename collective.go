package symmem

import (
	"context"
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
)

// AllGather gathers every rank's in into out, ordered by group rank: out
// holds Size() times in's bytes. In-place: in may be this rank's slice of
// out (out[Rank()*len(in):]). dt gives the element type (the data is moved
// as bytes).
func (g *Group) AllGather(ctx context.Context, out, in coll.Span, dt coll.DType, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.AllGather, dt: dt, in: in, out: out}
	return g.do(ctx, c, opts)
}

// ReduceScatter reduces in (Size() equal chunks of out's length) across the
// ranks with op; rank r receives the reduced chunk r in out. In-place: out
// may be this rank's chunk of in.
func (g *Group) ReduceScatter(ctx context.Context, out, in coll.Span, dt coll.DType, op coll.ReduceOp, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.ReduceScatter, dt: dt, op: op, in: in, out: out}
	return g.do(ctx, c, opts)
}

// AllReduce reduces in across the ranks with op into out on every rank
// (out may equal in).
func (g *Group) AllReduce(ctx context.Context, out, in coll.Span, dt coll.DType, op coll.ReduceOp, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.AllReduce, dt: dt, op: op, in: in, out: out}
	return g.do(ctx, c, opts)
}

// Broadcast copies buf of group rank root into buf on every rank.
func (g *Group) Broadcast(ctx context.Context, buf coll.Span, root int, dt coll.DType, opts ...CallOption) (coll.Path, error) {
	c := call{kind: coll.Broadcast, dt: dt, root: root, in: buf, out: buf}
	return g.do(ctx, c, opts)
}

// call is one collective as the user passed it.
type call struct {
	kind    coll.Kind
	dt      coll.DType
	op      coll.ReduceOp
	root    int
	in, out coll.Span
	count   int64           // backend.Request.Count, set by validate
	a2a     *backend.Splits // all-to-all's split counts (nil: equal blocks)
	used    [2]int64        // all-to-all with host counts: the bytes of in and out they cover
}

// do is the common route of every collective: validate, shape, record,
// agree, run. Where the memory is ordinary, the memory kind decided at Init
// what runs it (g.bg: staged through the pool for host memory, the backend
// itself on a device); do never asks.
func (g *Group) do(ctx context.Context, c call, opts []CallOption) (_ coll.Path, err error) {
	defer markTimeout(&err)
	o, err := g.validateCall(&c, opts)
	if err != nil {
		return coll.Path{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q: %w", c.kind, g.name, ErrGroupClosed)
	}
	req, err := g.shape(c, o)
	if err != nil {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q (rank %d): %w", c.kind, g.name, g.rank, err)
	}
	if g.w.opts.Checked {
		// The checked-mode exchange waits without a deadline of its own
		// (staging sets its own). The GPU path just enqueues; the CPU
		// direct path's waits (backend Run, Agree) are bounded by the group
		// timeout, which is Options.Timeout. A timer per call costs ~0.5 us
		// and 10 allocations.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.w.opts.Timeout)
		defer cancel()
	}
	req.Record = c.record(req, !(req.InSym.OK && req.OutSym.OK))
	req.Checked = g.w.opts.Checked
	if err := g.agreeCall(ctx, c, req.Record); err != nil {
		return coll.Path{}, err
	}
	if c.empty() {
		return coll.Path{Algo: coll.AlgoDirect, Reason: emptyCall}, nil
	}
	return g.run(ctx, c, req)
}

// validateCall checks everything about c that needs no lock: the world and
// membership, the arguments (setting c.count), the forced algorithm.
func (g *Group) validateCall(c *call, opts []CallOption) (callOpts, error) {
	if err := g.w.alive(); err != nil {
		return callOpts{}, err
	}
	if !g.IsMember() {
		return callOpts{}, fmt.Errorf("symmem: %v on group %q: rank %d is not one of its ranks %v: %w", c.kind, g.name, g.w.Rank(), g.ranks, ErrNotMember)
	}
	if err := g.validate(c); err != nil {
		return callOpts{}, fmt.Errorf("symmem: %v on group %q (rank %d): %w", c.kind, g.name, g.rank, err)
	}
	o := collect(opts)
	if o.algo == "" {
		o.algo = coll.AlgoAuto
	}
	if !g.w.caps.Supports(c.kind, o.algo) {
		return callOpts{}, fmt.Errorf("symmem: %v on group %q: algorithm %q is not available on the %s backend (want %q or one of %v): %w",
			c.kind, g.name, o.algo, g.w.Backend(), coll.AlgoAuto, g.w.caps.Algos[c.kind], ErrNotSupported)
	}
	return o, nil
}

// shape computes the request once (lengths, in-place, where each span lies
// in the pool); backends and staging read it. Ordinary (non-symmetric)
// spans are checked here, before the call reaches any peer.
func (g *Group) shape(c call, o callOpts) (backend.Request, error) {
	req := backend.Request{Kind: c.kind, DType: c.dt, Op: c.op, Root: c.root, Count: c.count,
		In: c.in, Out: c.out, Algo: o.algo, Stream: o.stream, A2A: c.a2a}.Shaped(g.Size(), g.rank)
	req.OutSym = g.sym(req.Out)
	req.InSym = req.OutSym
	if c.kind != coll.Broadcast {
		req.InSym = g.sym(req.In)
	}
	ordinary := !(req.InSym.OK && req.OutSym.OK)
	if c.a2a.Kind() == backend.SplitsHost { // looked up whole: a rank may send or receive nothing
		req.In.Len, req.Out.Len = c.used[0], c.used[1]
	}
	if c.a2a.Kind() == backend.SplitsDevice {
		req.A2A.DevSym, req.A2A.DevOutSym = g.sym(c.a2a.Dev), g.sym(c.a2a.DevOut)
		if ordinary || !req.A2A.DevSym.OK || !req.A2A.DevOutSym.OK {
			return req, fmt.Errorf("in, out, splits and splitsOut must all be symmetric buffers of the group (allocate them with Scope.Alloc; symmetric: in %v, out %v, splits %v, splitsOut %v): %w",
				req.InSym.OK, req.OutSym.OK, req.A2A.DevSym.OK, req.A2A.DevOutSym.OK, ErrInvalid)
		}
	}
	if ordinary {
		if err := g.w.mem.checkOrdinary(req); err != nil {
			return req, err
		}
		if err := g.w.freed(c.in, c.out); err != nil {
			return req, err
		}
	}
	return req, nil
}

// agreeCall compares c's record across the members where the run will not:
// every call's in checked mode, an empty call's (no data moves, so no
// signals carry it) otherwise.
func (g *Group) agreeCall(ctx context.Context, c call, rec agree.Record) error {
	if g.w.opts.Checked {
		// In-band where the group has an agreement (every member on one
		// host): it compares the same record as the store would, in about
		// a microsecond, and meets a peer ending a scope, which compares
		// only there (in the store this rank would wait out the timeout).
		if g.bg.Agreer() != nil {
			return g.agree(ctx, c, rec)
		}
		return g.checkedExchange(ctx, c, rec)
	}
	if c.empty() {
		return g.agree(ctx, c, rec)
	}
	return nil
}

// empty reports whether c moves no element on any rank (with split counts
// only the backend sees whether any rank moves data).
func (c call) empty() bool { return c.count == 0 && c.a2a.Kind() == backend.SplitsEqual }

// run runs req on the group's backend and names a disagreement the backend
// found in-band.
func (g *Group) run(ctx context.Context, c call, req backend.Request) (coll.Path, error) {
	p, err := g.bg.Run(ctx, req)
	if err == nil {
		return p, nil
	}
	if g.w.caps.Calls == agree.CallsInBand { // AsDisagreement allocates its target
		if d := agree.AsDisagreement(err); d != nil {
			return coll.Path{}, g.mismatch(c, d, "")
		}
	}
	return p, fmt.Errorf("symmem: %v on group %q (rank %d): %w", c.kind, g.name, g.rank, err)
}

// validate checks c's arguments against the group and sets c.count.
func (g *Group) validate(c *call) error {
	if !c.dt.Valid() {
		return fmt.Errorf("unknown dtype %v (want one of %v): %w", c.dt, coll.DTypes(), ErrInvalid)
	}
	if (c.kind == coll.ReduceScatter || c.kind == coll.AllReduce) && (c.op < coll.Sum || c.op > coll.Max) {
		return fmt.Errorf("unknown reduction %v (want sum, avg, min or max): %w", c.op, ErrInvalid)
	}
	es, n := int64(c.dt.Size()), int64(g.Size())
	for _, s := range []struct {
		name string
		sp   coll.Span
	}{{"in", c.in}, {"out", c.out}} {
		if s.sp.Len < 0 || s.sp.Len%es != 0 {
			return fmt.Errorf("%s holds %d bytes, not a whole number of %v elements (%d bytes each): %w", s.name, s.sp.Len, c.dt, es, ErrInvalid)
		}
		if s.sp.Len > 0 && s.sp.Ptr == 0 {
			return fmt.Errorf("%s has a nil address for %d bytes: %w", s.name, s.sp.Len, ErrInvalid)
		}
		if s.sp.End() < s.sp.Ptr || s.sp.Len > math.MaxInt64/n { // the size checks below multiply by n
			return fmt.Errorf("%s at %#x holds %d bytes: past the end of the address space: %w", s.name, s.sp.Ptr, s.sp.Len, ErrInvalid)
		}
	}
	switch c.kind {
	case coll.AllGather:
		if (c.out.Len/es)%n != 0 {
			return fmt.Errorf("output count %d is not divisible by the group size %d (all-gather out holds %d equal slices): %w", c.out.Len/es, n, n, ErrInvalid)
		}
		if c.out.Len != c.in.Len*n {
			return fmt.Errorf("out holds %d bytes, want group size %d × in's %d bytes = %d: %w", c.out.Len, n, c.in.Len, c.in.Len*n, ErrInvalid)
		}
		c.count = c.in.Len / es
		if overlaps(c.in, c.out) && c.in.Ptr != c.out.Ptr+uint64(int64(g.rank)*c.in.Len) {
			return fmt.Errorf("in overlaps out but is not this rank's slice out[%d:%d] (in-place all-gather passes exactly that slice): %w",
				int64(g.rank)*c.in.Len, int64(g.rank+1)*c.in.Len, ErrInvalid)
		}
	case coll.ReduceScatter:
		if (c.in.Len/es)%n != 0 {
			return fmt.Errorf("input count %d is not divisible by the group size %d (pad it to a multiple of %d): %w", c.in.Len/es, n, n, ErrInvalid)
		}
		if c.in.Len != c.out.Len*n {
			return fmt.Errorf("in holds %d bytes, want group size %d × out's %d bytes = %d: %w", c.in.Len, n, c.out.Len, c.out.Len*n, ErrInvalid)
		}
		c.count = c.out.Len / es
		if overlaps(c.in, c.out) && c.out.Ptr != c.in.Ptr+uint64(int64(g.rank)*c.out.Len) {
			return fmt.Errorf("out overlaps in but is not this rank's chunk in[%d:%d] (in-place reduce-scatter passes exactly that chunk): %w",
				int64(g.rank)*c.out.Len, int64(g.rank+1)*c.out.Len, ErrInvalid)
		}
	case coll.AllReduce:
		if c.in.Len != c.out.Len {
			return fmt.Errorf("in holds %d bytes and out %d; all-reduce needs equal lengths: %w", c.in.Len, c.out.Len, ErrInvalid)
		}
		if overlaps(c.in, c.out) && c.in.Ptr != c.out.Ptr {
			return fmt.Errorf("in and out partially overlap (pass the same span for in-place): %w", ErrInvalid)
		}
		c.count = c.in.Len / es
	case coll.Broadcast:
		if c.root < 0 || int64(c.root) >= n {
			return fmt.Errorf("root %d is not a group rank (want 0..%d): %w", c.root, n-1, ErrInvalid)
		}
		c.count = c.out.Len / es
	case coll.AllToAll:
		return g.validateA2A(c)
	default:
		return fmt.Errorf("unknown collective %v: %w", c.kind, ErrInvalid)
	}
	return nil
}

func overlaps(a, b coll.Span) bool {
	return a.Len > 0 && b.Len > 0 && a.Ptr < b.End() && b.Ptr < a.End()
}
