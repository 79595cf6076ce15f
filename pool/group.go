package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
)

type group struct {
	id    GroupID
	g     Group
	name  string
	size  int
	order uint64 // AddGroup's: the collectives over every group go in this order

	cmu  sync.Mutex // serializes this group's collectives; before p.mu
	xseq uint64     // collectives run (guarded by cmu)

	// guarded by p.mu
	closed  bool
	cursor  SegmentID // the last segment id registered with the group
	checked mark      // log position of the last check every rank saw
	// unsettled: that check found different allocations, so the log since
	// it holds the Frees that mend them, not the difference: name the
	// live blocks instead.
	unsettled bool
	scopes    []*Scope // open scopes, innermost last
}

// AddGroup adds a group to the pool and returns its id. It is local (not
// collective); ranks that add and remove groups in the same order get the same
// ids. The group's segments are registered lazily when its scopes end. order
// places the group among the others where a collective goes over every
// group (Trim, Close): it must be alike on every rank, and ids need not be
// (a rank that is not a member of a group adds no group, so the ids of
// later groups differ where such a group was removed; ordered by id, two
// ranks removed two groups in opposite orders and both waited out the
// timeout). The user API passes its count of NewGroup calls.
func (p *Pool) AddGroup(g Group, order uint64) (GroupID, error) {
	if g == nil {
		return 0, errors.New("pool: AddGroup: group is nil")
	}
	n, r := g.Size(), g.Rank()
	if n < 1 || r < 0 || r >= n {
		return 0, fmt.Errorf("pool: AddGroup(%q): rank %d of size %d is not a valid member", g.Name(), r, n)
	}
	p.trimMu.Lock() // no new groups while a Trim holds every group's lock
	defer p.trimMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("pool: AddGroup: %w", ErrClosed)
	}
	for id, x := range p.groups {
		if x == nil {
			name := g.Name()
			if name == "" {
				name = fmt.Sprintf("group%d", id)
			}
			p.groups[id] = &group{id: GroupID(id), g: g, name: name, size: n, order: order, checked: p.log.mark()}
			return GroupID(id), nil
		}
	}
	// A fixed count, not memory: freeing buffers would not help, closing a
	// group does. Invalid, so a peer that had room learns the kind too.
	return 0, fmt.Errorf("pool: AddGroup(%q): the pool already holds %d groups, its limit (the world group and every group "+
		"this rank is in): remove one first (close a group: Group.Close, symmem_group_close): %w", g.Name(), MaxGroups, errs.Invalid)
}

func (p *Pool) groupLocked(id GroupID) *group {
	if id < 0 || id >= MaxGroups {
		return nil
	}
	return p.groups[id]
}

// Scope is a region in which allocations are meant to be symmetric for one
// group. End registers the group's new segments.
type Scope struct {
	p        *Pool
	g        *group
	disabled bool
	ended    atomic.Bool
}

// OpenScope opens a scope for group id. Scopes of one group nest.
func (p *Pool) OpenScope(id GroupID) (*Scope, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("pool: OpenScope: %w", ErrClosed)
	}
	g := p.groupLocked(id)
	if g == nil {
		return nil, fmt.Errorf("%w: OpenScope(%d): no such group (removed, or never added)", ErrGroupClosed, id)
	}
	s := &Scope{p: p, g: g}
	g.scopes = append(g.scopes, s)
	return s, nil
}

// DisabledScope returns a scope whose End does nothing, for code paths that
// must not register memory.
func (p *Pool) DisabledScope() *Scope { return &Scope{p: p, disabled: true} }

// End closes the scope, verifies across the group's ranks that they made
// the same Alloc/Free calls with the same results (the pool's allocation
// state) and are about to register the same segments, and then registers, in
// creation order, every segment its group has not registered yet (see the
// package documentation). Every End is collective over the group's members,
// also one that registers nothing, so it behaves alike on every rank whatever
// each allocated: on a difference every rank returns an error wrapping
// ErrMismatch. Groups with an Agreer (Group.Agreer) compare in-band (no store round
// trip); others exchange through Group.AllGather. An out-of-order End
// (an inner scope of the same group still open) leaves the scope open; any
// other error ends it.
func (s *Scope) End(ctx context.Context) error {
	if s.disabled {
		if !s.ended.CompareAndSwap(false, true) {
			return fmt.Errorf("%w: disabled scope ended twice", ErrScopeOrder)
		}
		return nil
	}
	p, g := s.p, s.g
	p.mu.Lock()
	if s.ended.Load() {
		p.mu.Unlock()
		return fmt.Errorf("%w: scope of group %q ended twice", ErrScopeOrder, g.name)
	}
	if g.closed {
		s.ended.Store(true)
		p.mu.Unlock()
		return fmt.Errorf("%w: scope of group %q ended after the group was removed", ErrGroupClosed, g.name)
	}
	if p.closed {
		s.ended.Store(true)
		p.mu.Unlock()
		return fmt.Errorf("pool: Scope.End: %w", ErrClosed)
	}
	if n := len(g.scopes); n == 0 || g.scopes[n-1] != s {
		p.mu.Unlock()
		return fmt.Errorf("%w: scope of group %q ended while %d inner scope(s) of that group are open; end them first",
			ErrScopeOrder, g.name, n-1-slices.Index(g.scopes, s))
	}
	g.scopes[len(g.scopes)-1] = nil
	g.scopes = g.scopes[:len(g.scopes)-1]
	s.ended.Store(true)
	p.mu.Unlock()
	return p.endScope(ctx, g)
}

// endScope verifies g's ranks agree and registers the segments after g's
// cursor.
func (p *Pool) endScope(ctx context.Context, g *group) error {
	g.cmu.Lock()
	defer g.cmu.Unlock()
	p.mu.Lock()
	if g.closed || p.closed {
		p.mu.Unlock()
		return fmt.Errorf("%w: group %q was removed while its scope ended", ErrGroupClosed, g.name)
	}
	var segs []Segment
	i, _ := slices.BinarySearchFunc(p.byID, g.cursor+1, func(s *segment, id SegmentID) int { return cmp.Compare(s.seg.ID, id) })
	for _, s := range p.byID[i:] {
		segs = append(segs, s.seg)
	}
	from, to, st := g.checked, p.log.mark(), p.stateLocked()
	p.mu.Unlock()
	if g.size > 1 {
		if err := p.agree(ctx, g, segs, st, from, to); err != nil {
			if errors.Is(err, ErrMismatch) {
				// Every rank saw it: the next difference is named from here.
				p.mu.Lock()
				g.checked, g.unsettled = to, true
				p.mu.Unlock()
			}
			return err
		}
	}
	p.mu.Lock()
	g.checked, g.unsettled = to, false
	p.mu.Unlock()
	if len(segs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	for k, seg := range segs {
		if err := g.g.Register(ctx, seg); err != nil {
			return fmt.Errorf("pool: group %q: registering segment %d (%s): %w; %d earlier segment(s) of this scope are registered, this one and %d later are not",
				g.name, seg.ID, sizeStr(seg.Size), err, k, len(segs)-k-1)
		}
		p.mu.Lock()
		if s := p.segByIDLocked(seg.ID); s != nil {
			s.groups |= 1 << uint(g.id)
		}
		g.cursor = seg.ID
		p.mu.Unlock()
	}
	return nil
}

// agree verifies that g's ranks hold the same allocations (st) and are
// about to register the same segments: in-band where the group has an
// Agreer, through the store otherwise. The caller holds g.cmu.
func (p *Pool) agree(ctx context.Context, g *group, segs []Segment, st allocState, from, to mark) error {
	rec := func() storeRecord {
		return storeRecord{act: actRegister, xseq: g.xseq, segs: onlyIDSize(segs), state: st, logN: to.seq - from.seq, logH: rangeHash(from, to)}
	}
	a := g.g.Agreer()
	if a == nil { // every End costs a store round trip
		ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
		defer cancel()
		return p.verify(ctx, g, rec(), from)
	}
	err := a.Agree(ctx, scopeRecord(st, segs))
	if err == nil {
		return nil
	}
	d := agree.AsDisagreement(err)
	if d == nil {
		return fmt.Errorf("pool: group %q: comparing allocation state before ending a scope: %w; nothing was registered", g.name, err)
	}
	// A rank that is not ending a scope, or is at another call of the
	// group, never joins the store exchange below: say so at once (any
	// rank, not only the two the difference names: a third in a collective
	// left the others waiting out the timeout in that exchange).
	if d.Seq != d.Rank0Seq {
		return fmt.Errorf("pool: group %q, before ending a scope: %w; nothing was registered", g.name, d)
	}
	if d.AllKind != agree.RecScopeEnd {
		return fmt.Errorf("%w: group %q, before ending a scope: a rank is not ending a scope (it is in a collective of the group: every rank must make the same calls in the same order; rank %d's record %x, rank 0's %x); nothing was registered", ErrMismatch, g.name, d.Rank, d.Theirs, d.Rank0)
	}
	// Every rank is ending this scope and saw the difference: name the first
	// differing allocation through the store (the slow path, taken only on
	// a mismatch).
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	if verr := p.verify(ctx, g, rec(), from); verr != nil {
		return verr
	}
	return fmt.Errorf("pool: group %q, before ending a scope: %w; nothing was registered", g.name, d)
}

func onlyIDSize(ss []Segment) []Segment {
	out := make([]Segment, len(ss))
	for i, s := range ss {
		out[i] = Segment{ID: s.ID, Size: s.Size}
	}
	return out
}

func (p *Pool) segByIDLocked(id SegmentID) *segment {
	i, ok := slices.BinarySearchFunc(p.byID, id, func(s *segment, id SegmentID) int {
		switch {
		case s.seg.ID < id:
			return -1
		case s.seg.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return p.byID[i]
}

// RemoveGroup deregisters every segment registered with group id (in
// creation order, after verifying that every rank of the group would
// deregister the same ones) and removes the group; its open scopes end with
// ErrGroupClosed. Collective over the group.
func (p *Pool) RemoveGroup(ctx context.Context, id GroupID) error {
	p.mu.RLock()
	g := p.groupLocked(id)
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return fmt.Errorf("pool: RemoveGroup: %w", ErrClosed)
	}
	if g == nil {
		return fmt.Errorf("%w: RemoveGroup(%d): no such group (removed, or never added)", ErrGroupClosed, id)
	}
	g.cmu.Lock()
	defer g.cmu.Unlock()
	p.mu.RLock()
	var segs []Segment
	for _, s := range p.byID {
		if s.groups.has(id) {
			segs = append(segs, s.seg)
		}
	}
	gone := g.closed
	p.mu.RUnlock()
	if gone {
		return fmt.Errorf("%w: RemoveGroup(%d): already removed", ErrGroupClosed, id)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	rec := storeRecord{act: actRemove, xseq: g.xseq, segs: onlyIDSize(segs)}
	if err := p.verify(ctx, g, rec, mark{}); err != nil {
		return err
	}
	if err := p.deregister(ctx, g, segs); err != nil {
		return err
	}
	p.mu.Lock()
	p.forgetLocked(g)
	p.mu.Unlock()
	return nil
}

// DropGroup removes group id on this rank alone: it undoes AddGroup where
// the group's creation failed on another rank. Only a group that never
// registered a segment can go this way (registrations are undone
// together, by RemoveGroup); its open scopes end with ErrGroupClosed.
func (p *Pool) DropGroup(id GroupID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.groupLocked(id)
	switch {
	case g == nil || g.closed:
		return fmt.Errorf("%w: DropGroup(%d): no such group (removed, or never added)", ErrGroupClosed, id)
	case p.hasRegistrationsLocked(id):
		return fmt.Errorf("pool: DropGroup(%q): the group registered segments: remove it with RemoveGroup, together with its members", g.name)
	}
	p.forgetLocked(g)
	return nil
}

// forgetLocked removes g from the pool (its open scopes end with
// ErrGroupClosed, its id is free again). The caller holds p.mu.
func (p *Pool) forgetLocked(g *group) {
	g.closed = true
	clear(g.scopes)
	g.scopes = nil
	p.groups[g.id] = nil
}

// deregister deregisters segs from g in order, clearing the registration
// bits as it goes. The caller holds g.cmu.
func (p *Pool) deregister(ctx context.Context, g *group, segs []Segment) error {
	for k, seg := range segs {
		if err := g.g.Deregister(ctx, seg); err != nil {
			return fmt.Errorf("pool: group %q: deregistering segment %d: %w; %d segment(s) before it were deregistered, it and %d later were not",
				g.name, seg.ID, err, k, len(segs)-k-1)
		}
		p.mu.Lock()
		if s := p.segByIDLocked(seg.ID); s != nil {
			s.groups &^= 1 << uint(g.id)
		}
		p.mu.Unlock()
	}
	return nil
}
