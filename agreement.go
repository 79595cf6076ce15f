package symmem

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
)

// A collective's call record (package agree: its layout, digest and the
// naming of a difference, which the backends share): what every rank must
// pass alike for the result to be right. The CPU backend compares it across
// the ranks in-band, on the signals the collective exchanges anyway, before
// any peer data is read (internal/backend/shm/agree.go); checked mode also
// exchanges it through the store (checkedExchange).

func loc(s backend.Sym) uint64 {
	if !s.OK {
		return 0
	}
	return agree.Loc(uint64(s.Seg), s.Off)
}

// record is c's call record; req holds c's pool locations.
func (c call) record(req backend.Request, staged bool) agree.Record {
	var fl uint64
	if req.InPlace { // the direct path reads peers' buffers at this rank's offsets: ranks must agree
		fl |= agree.InPlace
	}
	if staged {
		fl |= agree.Staged
	}
	switch c.a2a.Kind() {
	case backend.SplitsHost: // the counts differ by rank: the backend checks them pairwise
		fl |= agree.HostSplits
	case backend.SplitsDevice:
		return agree.SplitsRecord(c.dt, fl, loc(req.InSym), loc(req.OutSym), loc(req.A2A.DevSym))
	}
	return agree.CallRecord(c.kind, c.dt, c.op, c.root, c.count, fl, loc(req.InSym), loc(req.OutSym))
}

// mismatch turns a disagreement about c into the user's error: the first
// rank that differs from group rank 0, which argument, and both values.
// how says where it was found ("" for the backend's in-band agreement).
func (g *Group) mismatch(c call, d *agree.Disagreement, how string) error {
	return fmt.Errorf("symmem: %v on group %q%s: %s: %w", c.kind, g.name, how, d.Explain(g.ranks), ErrMismatch)
}

// checkedExchange is checked mode's agreement: every rank's record of c
// through the store, compared like the in-band ones.
func (g *Group) checkedExchange(ctx context.Context, c call, rec agree.Record) error {
	all, err := g.bg.AllGather(ctx, agree.Call{Record: rec}.Append(nil))
	if err != nil {
		return fmt.Errorf("symmem: %v on group %q: checked mode: %w", c.kind, g.name, err)
	}
	recs := make([]agree.Record, len(all))
	for r, b := range all {
		x, err := agree.DecodeCall(b)
		if err != nil || len(b) != agree.RecordBytes {
			return fmt.Errorf("symmem: %v on group %q (checked mode): rank %d sent no call record (%d bytes): it is at another call of the group: %w",
				c.kind, g.name, g.ranks[r], len(b), ErrMismatch)
		}
		recs[r] = x.Record
	}
	if d := agree.FirstDisagreement(recs, nil); d != nil {
		return g.mismatch(c, d, " (checked mode)")
	}
	return nil
}

// agree compares a call's record in-band where the backend can: an empty
// call's (no data moves, so no signals carry it), and in checked mode every
// call's (in place of the store exchange).
func (g *Group) agree(ctx context.Context, c call, rec agree.Record) error {
	a := g.bg.Agreer()
	if a == nil || g.Size() == 1 {
		return nil
	}
	err := a.Agree(ctx, rec)
	if d := agree.AsDisagreement(err); d != nil {
		return g.mismatch(c, d, "")
	}
	if err != nil {
		return fmt.Errorf("symmem: %v on group %q (rank %d): %w", c.kind, g.name, g.rank, err)
	}
	return nil
}
