package symmem

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// stager is a host-memory backend's group as the user API runs it: a
// call on ordinary memory (not blocks registered with the group) is staged
// through the group's symmetric staging buffer; symmetric calls go to the
// backend as they are. hostMemory wraps every backend group in one (the
// memory kind decides, once); a device backend runs ordinary memory itself.
type stager struct {
	backend.Group
	g *Group
}

// Run runs req, staged where its buffers are not symmetric.
func (s *stager) Run(ctx context.Context, req backend.Request) (coll.Path, error) {
	if req.InSym.OK && req.OutSym.OK {
		return s.Group.Run(ctx, req)
	}
	// Staging waits for peers without a deadline of its own.
	ctx, cancel := context.WithTimeout(ctx, s.g.w.opts.Timeout)
	defer cancel()
	return s.g.staged(ctx, s.Group, req)
}

// Explain is Run's plan, staged where req is not symmetric.
func (s *stager) Explain(req backend.Request) coll.Path {
	if req.InSym.OK && req.OutSym.OK {
		return s.Group.Explain(req)
	}
	return s.g.explainStaged(s.Group, req)
}

// staged runs a call whose buffers are not symmetric on bg through the
// group's symmetric staging buffer, in rounds of at most StagingBytes.
// Every rank computes the same rounds (the counts agree), so the staging
// offsets are symmetric. Each round copies in, runs the collective in place
// on the staging buffer, and copies out. Its errors are about the call;
// Group.run names the call and the group.
func (g *Group) staged(ctx context.Context, bg backend.Group, req backend.Request) (coll.Path, error) {
	if g.staging.Len == 0 {
		return coll.Path{}, fmt.Errorf("buffers are not symmetric and staging is disabled (Options.StagingBytes < 0); allocate them with Scope.Alloc: %w", ErrNotSupported)
	}
	st := g.sym(g.staging)
	if !st.OK {
		return coll.Path{}, fmt.Errorf("the staging buffer is not registered with the group (internal error)")
	}
	if req.Kind == coll.AllToAll {
		return g.stagedA2A(ctx, bg, req, st)
	}
	c := struct {
		kind    coll.Kind
		dt      coll.DType
		count   int64
		root    int
		in, out coll.Span
	}{req.Kind, req.DType, req.Count, req.Root, req.In, req.Out}
	es, n, me := int64(c.dt.Size()), int64(g.Size()), int64(g.rank)
	per := g.stagedPer(c.kind, c.dt)
	if per == 0 {
		return coll.Path{}, fmt.Errorf("the %d-byte staging buffer is too small for one %v element per rank: %w",
			g.staging.Len, c.dt, ErrInvalid)
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
		p, err := bg.Run(ctx, r)
		if err != nil {
			return p, fmt.Errorf("staged round %d: %w", rounds, err)
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

// explainStaged is staged's plan for req (ordinary memory) on bg, which
// explains each round.
func (g *Group) explainStaged(bg backend.Group, req backend.Request) coll.Path {
	k := req.Kind
	if g.staging.Len <= 0 {
		return coll.Path{Algo: bg.Explain(req).Algo, Staged: true, Reason: "ordinary memory and staging disabled: the call fails; allocate buffers with Scope.Alloc"}
	}
	// What staged runs: rounds in place on the staging buffer, of at most
	// per elements (per rank for all-gather and reduce-scatter, per block
	// for all-to-all, whose rounds are out of place). The backend's plan
	// differs by placement and size (the CPU backend's one-shot limit is
	// lower in place).
	n, es := int64(g.Size()), int64(req.DType.Size())
	per := g.stagedPer(k, req.DType)
	if per == 0 || req.Count == 0 {
		return coll.Path{Staged: true, Reason: fmt.Sprintf("ordinary memory: group %q's %d-byte staging buffer holds no %v element per rank: the call fails", g.name, g.staging.Len, req.DType)}
	}
	rounds := (req.Count + per - 1) / per
	round := min(per, req.Count) * es
	if k == coll.AllGather || k == coll.ReduceScatter || k == coll.AllToAll {
		round *= n
	}
	r := g.explainRequest(k, round, true)
	me := uint64(max(g.rank, 0))
	switch k {
	case coll.AllGather:
		r.In.Ptr = r.Out.Ptr + me*uint64(r.In.Len)
	case coll.ReduceScatter:
		r.Out.Ptr = r.In.Ptr + me*uint64(r.Out.Len)
	case coll.AllToAll:
	default:
		r.In = r.Out
	}
	r = r.Shaped(int(n), max(g.rank, 0))
	p := bg.Explain(r)
	how := "in place"
	if k == coll.AllToAll {
		how = "out of place"
	}
	return coll.Path{Algo: p.Algo, Staged: true, Reason: fmt.Sprintf(
		"ordinary memory: staged through group %q's %d-byte symmetric buffer in %d round(s), %s; %s",
		g.name, g.staging.Len, rounds, how, p.Reason)}
}
