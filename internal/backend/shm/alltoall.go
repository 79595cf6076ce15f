package shm

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// All-to-all with split counts. A plan that pulls needs every peer's
// counts (where its block for this rank starts in its In), so each rank
// writes its counts to a count slot of its pad before the plan's phase 0
// (plan.Prelude), and after it every rank reads every rank's slot, checks
// the whole matrix (every rank finds the same first fault, so a fault is
// an error on every rank after phase 0 only, like a record mismatch, and
// the group stays usable) and builds its plan from it (plan.AllToAllV).
// A count slot holds In's and Out's capacities in elements, then the n
// counts sent and the n counts expected (host splits; -1 where not
// given). Two slots, by record number: a peer that failed the check may
// enter the next call and write its next slot while this rank still reads.

// countsBytes is one count slot's size, whole cache lines.
func countsBytes(n int) int64 {
	b := int64(2+2*n) * 8
	return (b + padLine - 1) / padLine * padLine
}

// counts is owner's count slot for record k.
func (p *pads) counts(owner int, k uint64) []uint64 {
	off := int64((p.n+recSlots+1)*padLine) + int64(k%recSlots)*countsBytes(p.n)
	w, ok := hostmem.View[uint64](p.peers[owner][off:][:8*(2+2*p.n)])
	if !ok {
		panic("shm: signal pad count slot is not 8-byte aligned")
	}
	return w
}

// runSplits runs an all-to-all with split counts (runMu held).
func (g *Group) runSplits(x *exec, req backend.Request) error {
	n, es := len(g.Ranks), int64(req.DType.Size())
	pre := plan.Plan{Kind: coll.AllToAll, N: n, Rank: g.Me, DType: req.DType, Phases: 1, Steps: plan.Prelude(n, g.Me)}
	if n == 1 {
		pre.Steps = nil
	}
	x.p = pre
	if err := g.check(req, pre, x); err != nil {
		return err // n > 1 always carries the record on phase 0: check fails only in its own agreement
	}
	k := x.rec
	if !x.check {
		k = g.records // no record: the slot still alternates
		g.records++
	}
	slot := g.pads.counts(g.Me, k)
	slot[0], slot[1] = uint64(req.In.Len/es), uint64(req.Out.Len/es)
	switch req.A2A.Kind() {
	case backend.SplitsHost:
		for j := range n {
			slot[2+j], slot[2+n+j] = uint64(req.A2A.Send[j]), uint64(req.A2A.Recv[j])
		}
	case backend.SplitsDevice:
		dev, _ := hostmem.View[uint64](hostmem.Bytes(req.A2A.Dev.Ptr, 8*n))
		for j := range n {
			slot[2+j], slot[2+n+j] = dev[j], ^uint64(0)
		}
	}
	if err := g.execute(x); err != nil {
		return err
	}
	counts, err := g.readCounts(k, req.A2A.Kind())
	if err != nil {
		x.mismatch = true // every rank found it and stops after phase 0
		return err
	}
	if req.A2A.Kind() == backend.SplitsDevice {
		out, _ := hostmem.View[int64](hostmem.Bytes(req.A2A.DevOut.Ptr, 16*n))
		var off int64
		for i := range n {
			out[i], out[n+i] = counts[i][g.Me], off
			off += counts[i][g.Me]
		}
	}
	if req.A2A.Hi > 0 {
		for _, row := range counts {
			for j, c := range row {
				row[j] = min(max(c-req.A2A.Lo, 0), req.A2A.Hi-req.A2A.Lo)
			}
		}
	}
	p, err := plan.AllToAllV(n, g.Me, req.DType, counts, plan.Options{})
	if err != nil {
		g.breakOn(err)
		return err
	}
	ctx, deadline := x.ctx, x.deadline
	if x, err = g.prepare(req, p); err != nil {
		g.breakOn(err) // the peers passed phase 0 and read this rank's In
		return err
	}
	x.ctx, x.deadline, x.signalled = ctx, deadline, true
	x.p.Steps = p.Steps[len(pre.Steps):]
	if err := g.execute(x); err != nil {
		return err
	}
	g.epoch += uint32(p.Phases)
	return nil
}

// readCounts reads every rank's count slot for record k as a matrix
// (counts[i][j]: elements rank i sends rank j) and checks it: no count
// below zero, what a rank sends is what its peer expects (host splits),
// and no rank reads past its In or writes past its Out (device splits).
// Every rank reads the same slots, so every rank returns the same error.
func (g *Group) readCounts(k uint64, form backend.SplitForm) ([][]int64, error) {
	n := len(g.Ranks)
	slots := make([][]uint64, n)
	counts := make([][]int64, n)
	for i := range n {
		slots[i] = g.pads.counts(i, k)
		counts[i] = make([]int64, n)
		for j := range n {
			counts[i][j] = int64(slots[i][2+j])
		}
	}
	for i, row := range counts {
		for j, c := range row {
			if c < 0 {
				return nil, fmt.Errorf("rank %d's split count for rank %d is %d; counts are elements, >= 0: %w", g.Ranks[i], g.Ranks[j], c, errs.Invalid)
			}
		}
	}
	if form == backend.SplitsHost {
		for i, row := range counts {
			for j, c := range row {
				if r := int64(slots[j][2+n+i]); r != c {
					return nil, fmt.Errorf("rank %d sends %d elements to rank %d, but rank %d expects %d from rank %d (sendCounts[%d] on rank %d must equal recvCounts[%d] on rank %d): %w",
						g.Ranks[i], c, g.Ranks[j], g.Ranks[j], r, g.Ranks[i], j, g.Ranks[i], i, g.Ranks[j], errs.Mismatch)
				}
			}
		}
		return counts, nil
	}
	for i := range n {
		var send, recv int64
		for j := range n {
			send, recv = send+counts[i][j], recv+counts[j][i]
			if send < 0 || recv < 0 {
				return nil, fmt.Errorf("the split counts of rank %d overflow int64: %w", g.Ranks[i], errs.Invalid)
			}
		}
		if c := int64(slots[i][0]); send > c {
			return nil, fmt.Errorf("rank %d's split counts sum to %d elements, but its in holds %d: %w", g.Ranks[i], send, c, errs.Invalid)
		}
		if c := int64(slots[i][1]); recv > c {
			return nil, fmt.Errorf("rank %d would receive %d elements, but its out holds %d (the output's capacity bounds the counts; nothing was written): %w", g.Ranks[i], recv, c, errs.Invalid)
		}
	}
	return counts, nil
}
