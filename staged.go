package symmem

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// staged runs a call whose buffers are not symmetric through the group's
// symmetric staging buffer, in rounds of at most StagingBytes. Every rank
// computes the same rounds (the counts agree), so the staging offsets are
// symmetric. Each round copies in, runs the collective in place on the
// staging buffer, and copies out.
func (g *Group) staged(ctx context.Context, c call, req backend.Request) (coll.Path, error) {
	if g.staging.Len == 0 {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q: buffers are not symmetric and staging is disabled (Options.StagingBytes < 0); allocate them with Scope.Alloc: %w",
			c.kind, g.name, ErrNotSupported)
	}
	if !g.w.host {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q: staging on the %s backend: %w", c.kind, g.name, g.w.Backend(), ErrNotSupported)
	}
	st := g.sym(g.staging)
	if !st.OK {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q: the staging buffer is not registered with the group (internal error)", c.kind, g.name)
	}
	if c.kind == coll.AllToAll {
		return g.stagedA2A(ctx, c, req, st)
	}
	es, n, me := int64(c.dt.Size()), int64(g.Size()), int64(g.rank)
	per := g.stagedPer(c.kind, c.dt)
	if per == 0 {
		return coll.Path{}, fmt.Errorf("symmem: %v on group %q: the %d-byte staging buffer is too small for one %v element per rank: %w",
			c.kind, g.name, g.staging.Len, c.dt, ErrInvalid)
	}
	stage := hostmem.Bytes(g.staging.Ptr, int(g.staging.Len))
	var user struct{ in, out []byte }
	if c.in.Len > 0 {
		user.in = hostmem.Bytes(c.in.Ptr, int(c.in.Len))
	}
	user.out = hostmem.Bytes(c.out.Ptr, int(c.out.Len))
	span := func(off, bytes int64) (coll.Span, backend.Sym) {
		return coll.Span{Ptr: g.staging.Ptr + uint64(off), Len: bytes},
			backend.Sym{OK: true, Seg: st.Seg, Off: st.Off + off}
	}
	rounds := 0
	var path coll.Path
	for k0 := int64(0); k0 < c.count; k0 += per {
		k := min(per, c.count-k0) // elements this round (per rank for AG/RS)
		b, o := k*es, k0*es       // bytes this round, byte offset into each slice
		r := req
		r.Count = k
		r.InPlace = true // every round runs in place on the staging buffer
		switch c.kind {
		case coll.AllGather: // in-place on staging: my slice at me*b
			copy(stage[me*b:(me+1)*b], user.in[o:o+b])
			r.In, r.InSym = span(me*b, b)
			r.Out, r.OutSym = span(0, n*b)
		case coll.ReduceScatter: // in-place: out is my chunk of the staged input
			for j := range n {
				copy(stage[j*b:(j+1)*b], user.in[j*c.count*es+o:][:b])
			}
			r.In, r.InSym = span(0, n*b)
			r.Out, r.OutSym = span(me*b, b)
		case coll.AllReduce:
			copy(stage[:b], user.in[o:o+b])
			r.In, r.InSym = span(0, b)
			r.Out, r.OutSym = r.In, r.InSym
		case coll.Broadcast:
			if me == int64(c.root) {
				copy(stage[:b], user.out[o:o+b])
			}
			r.Out, r.OutSym = span(0, b)
			r.In, r.InSym = r.Out, r.OutSym
		}
		p, err := g.bg.Run(ctx, r)
		if err != nil {
			return p, fmt.Errorf("symmem: %v on group %q (rank %d), staged round %d: %w", c.kind, g.name, g.rank, rounds, err)
		}
		path = p
		switch c.kind {
		case coll.AllGather:
			for j := range n {
				copy(user.out[j*c.count*es+o:][:b], stage[j*b:(j+1)*b])
			}
		case coll.ReduceScatter:
			copy(user.out[o:o+b], stage[me*b:(me+1)*b])
		case coll.AllReduce, coll.Broadcast:
			copy(user.out[o:o+b], stage[:b])
		}
		rounds++
	}
	path.Staged = true
	path.Reason = fmt.Sprintf("buffers are not symmetric blocks registered with group %q: staged through its %d-byte symmetric buffer in %d round(s)",
		g.name, g.staging.Len, rounds)
	return path, nil
}

// stagedPer is how many elements of one rank's data a staged round moves
// (all-to-all: of each block; staged runs the call in rounds of it;
// Explain says so).
func (g *Group) stagedPer(k coll.Kind, dt coll.DType) int64 {
	per := g.staging.Len / int64(dt.Size())
	switch k {
	case coll.AllGather, coll.ReduceScatter:
		per /= int64(g.Size())
	case coll.AllToAll: // n blocks in, n out
		per /= 2 * int64(g.Size())
	}
	return per
}
