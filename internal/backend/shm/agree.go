package shm

import (
	"context"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// In-band agreement. After its n target lines every pad holds recSlots
// record slots (one line each): a rank writes what it is about to do (a
// agree.Record: the arguments of a collective, or its allocation state at a
// scope end) and the signal value it goes with into slot k%recSlots before
// its first signal of call k, and peers read it once that signal has
// arrived. Collectives whose plan starts with an all-to-all phase 0
// (all-gather, reduce-scatter, all-reduce) carry the record on that phase, so
// the check costs no extra wait; the others (broadcast, empty calls, scope
// ends) run one all-to-all phase for it. Every rank sees every record before
// it moves any peer's data, so a difference is an error on every rank, and
// every rank has then signalled exactly that one phase: the epochs stay equal
// and the group stays usable. Two slots: a peer can be at most one call
// ahead (it cannot pass the next call's phase 0 without this rank), so it
// never overwrites a record still being read.
const recSlots = 2

// slot returns owner's record slot for call k as words: the tag, then the
// record. The views are made once, after the peers' pads are mapped.
func (p *pads) slot(owner int, k uint64) *[1 + len(agree.Record{})]uint64 {
	if p.recs == nil {
		p.recs = make([][recSlots]*[1 + len(agree.Record{})]uint64, p.n)
		for q, m := range p.peers {
			for i := range recSlots {
				w, ok := hostmem.View[uint64](m[(p.n+i)*padLine:][:padLine])
				if !ok {
					panic("shm: signal pad record slot is not 8-byte aligned")
				}
				p.recs[q][i] = (*[1 + len(agree.Record{})]uint64)(w)
			}
		}
	}
	return p.recs[owner][k%recSlots]
}

// put writes this rank's record for call k, tagged with the signal value
// tag. Plain stores: the signal's atomic store that follows publishes them.
func (p *pads) put(k uint64, tag uint32, r agree.Record) {
	w := p.slot(p.me, k)
	w[0] = uint64(tag)
	copy(w[1:], r[:])
}

// get reads owner's record for call k (after its signal was seen).
func (p *pads) get(owner int, k uint64) (tag uint64, r agree.Record) {
	w := p.slot(owner, k)
	copy(r[:], w[1:])
	return w[0], r
}

// compare reads every rank's record for call k and returns the first
// difference from group rank 0's (every rank computes the same).
func (p *pads) compare(k uint64) *agree.Disagreement {
	w0 := p.slot(0, k)
	for q := 1; q < p.n; q++ {
		if *p.slot(q, k) != *w0 {
			t0, r0 := p.get(0, k)
			t, r := p.get(q, k)
			all := agree.AllKind(p.n, func(o int) (agree.Record, uint64) {
				t, r := p.get(o, k)
				return r, t
			})
			return &agree.Disagreement{Rank: q, Theirs: r, Rank0: r0, Seq: t, Rank0Seq: t0, AllKind: all}
		}
	}
	return nil
}

// Agreer is the group's in-band agreement (pool.Group): the signal pads.
func (g *Group) Agreer() agree.Agreer { return g }

// Agree compares rec across the group's ranks in one all-to-all phase of the
// signal pads (agree.Agreer).
func (g *Group) Agree(ctx context.Context, rec agree.Record) error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.broken != nil {
		return g.broken
	}
	deadline := time.Now().Add(g.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := g.agreeLocked(ctx, rec, deadline); err != nil {
		if agree.AsDisagreement(err) == nil {
			return fmt.Errorf("shm: group %q: %w", g.GroupName, g.rootCause(err))
		}
		return err
	}
	return nil
}

// agreeLocked runs one agreement phase. A wait that fails breaks the group
// (the peers' epochs no longer line up); a disagreement does not.
func (g *Group) agreeLocked(ctx context.Context, rec agree.Record, deadline time.Time) error {
	if g.pads.n == 1 {
		return nil
	}
	v := g.epoch + 1
	k := g.records
	g.records++
	g.pads.put(k, v, rec)
	for q := range g.pads.n {
		if q != g.Me {
			if err := g.pads.signal(q, v); err != nil {
				g.breakOn(err)
				return err
			}
		}
	}
	for i := 1; i < g.pads.n; i++ {
		q := (g.Me + i) % g.pads.n
		if err := g.pads.wait(ctx, q, v, deadline, g.alive); err != nil {
			g.breakOn(err)
			return fmt.Errorf("rank %d, agreement phase: %w", g.Ranks[q], err)
		}
	}
	g.epoch++
	if d := g.pads.compare(k); d != nil {
		return d
	}
	return nil
}
