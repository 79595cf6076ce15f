package symmem

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/pool"
)

// The argument record of a collective (pool.Record, kind pool.RecCall): what
// every rank must pass alike for the result to be right; its layout and the
// naming of a difference are internal/backend's (callrecord.go), which the
// GPU backend shares. The CPU backend compares it across the ranks in-band,
// on the signals the collective exchanges anyway, before any peer data is
// read (internal/backend/shm/agree.go).
const (
	flagInPlace = backend.CallInPlace
	flagStaged  = backend.CallStaged
)

func loc(s backend.Sym) uint64 {
	if !s.OK {
		return 0
	}
	return uint64(s.Seg)<<48 | uint64(s.Off)&(1<<48-1)
}

// record is c's argument record; req holds c's pool locations.
func (c call) record(req backend.Request, staged bool) pool.Record {
	var fl uint64
	if req.InPlace { // the direct path reads peers' buffers at this rank's offsets: ranks must agree
		fl |= flagInPlace
	}
	if staged {
		fl |= flagStaged
	}
	r := pool.Record{pool.RecCall<<56 | uint64(c.kind)<<48 | uint64(c.dt)<<40 | uint64(c.op)<<32 | fl,
		uint64(c.root), uint64(c.count)}
	if !staged {
		r[3], r[4] = loc(req.InSym), loc(req.OutSym)
		// In place, the rank's slice lies at a rank-dependent offset of
		// the whole tensor, whose location is what must agree.
		switch {
		case c.kind == coll.Broadcast || fl&flagInPlace != 0 && c.kind == coll.AllGather:
			r[3] = 0
		case fl&flagInPlace != 0 && c.kind == coll.ReduceScatter:
			r[4] = 0
		}
	}
	return r
}

// mismatch turns a disagreement about c into the user's error: the first
// rank that differs from group rank 0, which argument, and both values.
func (g *Group) mismatch(c call, d *pool.Disagreement) error {
	r, r0 := g.ranks[d.Rank], g.ranks[0]
	what := fmt.Sprintf("%v on group %q", c.kind, g.name)
	if d.Seq != d.Rank0Seq {
		return fmt.Errorf("symmem: %s: rank %d is at another collective or scope end of the group than rank %d (a rank skipped or added one): %w", what, r, r0, ErrMismatch)
	}
	a, b := d.Theirs, d.Rank0
	if a.What() != pool.RecCall || b.What() != pool.RecCall {
		name := func(x pool.Record) string {
			if x.What() == pool.RecCall {
				return "called " + backend.CallKind(x).String()
			}
			return "is ending a scope"
		}
		return fmt.Errorf("symmem: %s: rank %d %s, rank %d %s: %w", what, r, name(a), r0, name(b), ErrMismatch)
	}
	arg, va, vb, _ := backend.CallDiff(a, b)
	return fmt.Errorf("symmem: %s: rank %d passed %s=%v, rank %d %s=%v (every rank must pass the same; buffers at the same pool offset: allocate them with the same Alloc calls in the same order): %w",
		what, r, arg, va, r0, arg, vb, ErrMismatch)
}

// agree compares an empty call's record (no data moves, so no signals carry
// it) where the backend can do so in-band.
func (g *Group) agree(ctx context.Context, c call, rec pool.Record) error {
	a, ok := g.bg.(pool.Agreer)
	if !ok || g.Size() == 1 {
		return nil
	}
	err := a.Agree(ctx, rec)
	if d := pool.AsDisagreement(err); d != nil {
		return g.mismatch(c, d)
	}
	if err != nil {
		return fmt.Errorf("symmem: %v on group %q (rank %d): %w", c.kind, g.name, g.rank, err)
	}
	return nil
}
