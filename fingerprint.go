package symmem

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/pool"
)

// The argument record of a collective (pool.Record, kind pool.RecCall): what
// every rank must pass alike for the result to be right. The CPU backend
// compares it across the ranks in-band, on the signals the collective
// exchanges anyway, before any peer data is read (internal/backend/shm/agree.go).
//
//	word 0: RecCall<<56 | kind<<48 | dtype<<40 | op<<32 | flags
//	word 1: root
//	word 2: count
//	word 3: in's pool location (segment<<48 | offset), 0 for ordinary memory
//	word 4: out's pool location
const (
	flagInPlace = 1 << iota
	flagStaged
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
				return "called " + coll.Kind(x[0]>>48&0xff).String()
			}
			return "is ending a scope"
		}
		return fmt.Errorf("symmem: %s: rank %d %s, rank %d %s: %w", what, r, name(a), r0, name(b), ErrMismatch)
	}
	field := func(w uint64, shift uint) uint64 { return w >> shift & 0xff }
	var arg string
	var va, vb any
	switch {
	case field(a[0], 48) != field(b[0], 48):
		arg, va, vb = "collective", coll.Kind(field(a[0], 48)), coll.Kind(field(b[0], 48))
	case field(a[0], 40) != field(b[0], 40):
		arg, va, vb = "dtype", coll.DType(field(a[0], 40)), coll.DType(field(b[0], 40))
	case field(a[0], 32) != field(b[0], 32):
		arg, va, vb = "op", coll.ReduceOp(field(a[0], 32)), coll.ReduceOp(field(b[0], 32))
	case a[1] != b[1]:
		arg, va, vb = "root", a[1], b[1]
	case a[2] != b[2]:
		arg, va, vb = "count", a[2], b[2]
	case a[0]&flagInPlace != b[0]&flagInPlace:
		arg, va, vb = "in-place", a[0]&flagInPlace != 0, b[0]&flagInPlace != 0
	case a[0]&flagStaged != b[0]&flagStaged:
		arg, va, vb = "staged (ordinary memory)", a[0]&flagStaged != 0, b[0]&flagStaged != 0
	case a[3] != b[3]:
		arg, va, vb = "in offset", locStr(a[3]), locStr(b[3])
	default:
		arg, va, vb = "out offset", locStr(a[4]), locStr(b[4])
	}
	return fmt.Errorf("symmem: %s: rank %d passed %s=%v, rank %d %s=%v (every rank must pass the same; buffers at the same pool offset: allocate them with the same Alloc calls in the same order): %w",
		what, r, arg, va, r0, arg, vb, ErrMismatch)
}

func locStr(l uint64) string {
	return fmt.Sprintf("segment %d + %#x", l>>48, l&(1<<48-1))
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
