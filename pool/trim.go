package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/errs"
)

// lockGroups takes the collective lock of every live group, in AddGroup's
// order (alike on every rank; ids need not be), so no scope registers while
// segments are being released. It returns the
// groups and a function that unlocks them. The caller holds p.trimMu (so no
// group is added meanwhile).
func (p *Pool) lockGroups() ([]*group, func()) {
	p.mu.RLock()
	var gs []*group
	for _, g := range p.groups {
		if g != nil {
			gs = append(gs, g)
		}
	}
	p.mu.RUnlock()
	sortGroups(gs)
	for _, g := range gs {
		g.cmu.Lock()
	}
	return gs, func() {
		for i := len(gs) - 1; i >= 0; i-- {
			gs[i].cmu.Unlock()
		}
	}
}

// Trim releases every segment that is entirely free (blocks freed with a
// fence count once the fence is done). It is collective over every group
// that has segments registered: for each such group (in id order) the ranks
// first verify that they would release the same registered segments and made
// the same Alloc/Free calls since the group's last check; on any mismatch
// nothing is released. Then each segment is deregistered from every group
// holding it, released through the provider, and forgotten entirely.
func (p *Pool) Trim(ctx context.Context) error {
	p.trimMu.Lock()
	defer p.trimMu.Unlock()
	gs, unlock := p.lockGroups()
	defer unlock()

	type work struct {
		g        *group
		segs     []Segment
		from, to mark
		st       allocState
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("pool: Trim: %w", ErrClosed)
	}
	if len(p.pending) > 0 {
		p.dropDoneLocked()
	}
	var cands []*segment
	for _, s := range p.byID {
		if len(s.blocks) == 1 && s.blocks[0].state == stateFree {
			p.removeFree(s, 0, s.seg.Size)
			s.trimming = true
			cands = append(cands, s)
		}
	}
	for _, s := range cands { // the device may still read a freed block
		if err := p.awaitLocked(s, 0, -1); err != nil {
			for _, c := range cands {
				c.trimming = false
				p.addFree(c, 0, c.seg.Size)
			}
			p.mu.Unlock()
			return fmt.Errorf("pool: Trim: %w", err)
		}
	}
	var ws []work
	to, st := p.log.mark(), p.stateLocked()
	for _, g := range gs {
		if g.closed || !p.hasRegistrationsLocked(g.id) {
			continue
		}
		w := work{g: g, from: g.checked, to: to, st: st}
		for _, s := range cands {
			if s.groups.has(g.id) {
				w.segs = append(w.segs, s.seg)
			}
		}
		ws = append(ws, w)
	}
	p.mu.Unlock()

	restore := func() {
		p.mu.Lock()
		for _, s := range cands {
			if s.trimming {
				s.trimming = false
				p.addFree(s, 0, s.seg.Size)
			}
		}
		p.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	for _, w := range ws {
		rec := storeRecord{act: actTrim, xseq: w.g.xseq, segs: onlyIDSize(w.segs), state: w.st, logN: w.to.seq - w.from.seq, logH: rangeHash(w.from, w.to)}
		if err := p.verify(ctx, w.g, rec, w.from); err != nil {
			restore()
			return err
		}
	}
	p.mu.Lock()
	for _, w := range ws {
		w.g.checked, w.g.unsettled = w.to, false
	}
	p.mu.Unlock()
	for _, w := range ws {
		if err := p.deregister(ctx, w.g, w.segs); err != nil {
			// Segments stay (free); those already deregistered from some
			// groups are not registered with them again.
			restore()
			return fmt.Errorf("pool: Trim: %w", err)
		}
	}
	var errs []error
	p.mu.Lock()
	p.free.spare = nil // give recycled index nodes back to the GC
	for _, s := range cands {
		p.dropSegmentLocked(s)
		if err := p.prov.ReleaseSegment(s.seg.ID); err != nil {
			errs = append(errs, fmt.Errorf("segment %d: %w", s.seg.ID, err))
		}
	}
	p.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("pool: Trim: the provider failed to release (the pool no longer tracks these segments): %w", errors.Join(errs...))
	}
	return nil
}

func (p *Pool) hasRegistrationsLocked(id GroupID) bool {
	for _, s := range p.byID {
		if s.groups.has(id) {
			return true
		}
	}
	return false
}

// Close removes every group (collective, in AddGroup's order; see RemoveGroup) and
// releases every segment, live blocks included. If removing a group fails,
// Close returns the error and the pool stays open (groups removed so far stay
// removed); call Close again once the cause is fixed. Every later call returns
// ErrClosed.
func (p *Pool) Close(ctx context.Context) error {
	p.trimMu.Lock()
	defer p.trimMu.Unlock()
	p.mu.RLock()
	closed := p.closed
	var gs []*group
	for _, g := range p.groups {
		if g != nil {
			gs = append(gs, g)
		}
	}
	p.mu.RUnlock()
	if closed {
		return fmt.Errorf("pool: Close: %w", ErrClosed)
	}
	sortGroups(gs)
	for _, g := range gs {
		if err := p.RemoveGroup(ctx, g.id); err != nil {
			if errors.Is(err, errs.PeerExited) || errors.Is(err, errs.PeerClosed) || errors.Is(err, errs.Broken) {
				return fmt.Errorf("pool: Close: %w (a rank no longer takes part in the group, so it cannot be removed together; the pool stays open)", err)
			}
			return fmt.Errorf("pool: Close: %w (groups removed so far stay removed; the pool stays open)", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, s := range p.byID {
		if err := p.prov.ReleaseSegment(s.seg.ID); err != nil {
			errs = append(errs, fmt.Errorf("segment %d: %w", s.seg.ID, err))
		}
		s.blocks = nil
	}
	p.closed = true
	p.byID, p.byBase, p.bases, p.pending = nil, nil, nil, nil
	p.free.reset()
	p.reserved, p.inUse, p.pendingBytes, p.liveBlocks = 0, 0, 0, 0
	if len(errs) > 0 {
		return fmt.Errorf("pool: Close: the provider failed to release: %w", errors.Join(errs...))
	}
	return nil
}

// Abandon closes the pool on this rank alone, for a caller whose Close
// failed (a peer left, so the groups cannot be removed together) and that
// releases the memory itself (the backend's Close): the pool forgets its
// groups and segments without deregistering or releasing them, so no
// address is reported live afterwards (Live, Lookup, Symmetric, Freed) and
// every later call returns ErrClosed. It does nothing on a closed pool.
func (p *Pool) Abandon() {
	p.trimMu.Lock()
	defer p.trimMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	for _, g := range p.groups {
		if g != nil {
			p.forgetLocked(g)
		}
	}
	for _, s := range p.byID {
		s.blocks = nil
	}
	p.closed = true
	p.byID, p.byBase, p.bases, p.pending = nil, nil, nil, nil
	p.free.reset()
	p.reserved, p.inUse, p.pendingBytes, p.liveBlocks = 0, 0, 0, 0
}

// sortGroups orders gs as AddGroup's order says, the same on every rank
// (ties, which a user of the pool alone may leave, by id).
func sortGroups(gs []*group) {
	slices.SortFunc(gs, func(a, b *group) int {
		if c := cmp.Compare(a.order, b.order); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
}
