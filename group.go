package symmem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/pool"
)

// Group is a set of ranks that run collectives together. Create groups with
// World.NewGroup; the world group is World.World().
type Group struct {
	w       *World
	name    string
	ranks   []int // global ranks, ascending; group rank = index
	rank    int   // this rank's group rank, -1 for a non-member
	bg      backend.Group
	gid     pool.GroupID
	staging coll.Span // symmetric staging buffer (Len 0 when disabled)

	mu     sync.Mutex // one collective at a time per group
	closed atomic.Bool
	// teardown is held through Group.Close: World.Close's Leave must not
	// touch a backend group that Close is releasing.
	teardown sync.Mutex
}

// IsMember reports whether this rank belongs to the group.
func (g *Group) IsMember() bool { return g.rank >= 0 }

// Rank is this rank's index in the group (-1 for a non-member).
func (g *Group) Rank() int { return g.rank }

// Size is the number of ranks in the group.
func (g *Group) Size() int { return len(g.ranks) }

// Name is the group's name.
func (g *Group) Name() string { return g.name }

// Ranks lists the members' world ranks; group rank i is Ranks()[i].
func (g *Group) Ranks() []int { return slices.Clone(g.ranks) }

// Close removes the group. Like NewGroup it is collective over the whole
// world: every rank calls it for the same group (verified: ErrMismatch
// otherwise). Members wait for the group's GPU work, deregister the pool's
// segments from it (verified across the members) and close its backend group
// (NCCL finalizes its communicators with the peers); every rank frees the
// group's staging buffer, so the pools stay identical. Buffers allocated
// through the group's scopes stay allocated: free them with World.Free.
// Later calls on the group fail with ErrGroupClosed, and its name may be
// used again. The world group is closed by World.Close. Local resources are
// released even when a collective step fails (a peer died); the error says
// what failed.
func (g *Group) Close(ctx context.Context) (err error) {
	defer markTimeout(&err)
	w := g.w
	if err := w.alive(); err != nil {
		return err
	}
	if g == w.World() {
		return fmt.Errorf("symmem: Close of the world group: close the World instead: %w", ErrInvalid)
	}
	g.teardown.Lock()
	defer g.teardown.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() { // closed before, or by World.Close meanwhile
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	// A member waiting for this rank in a call of the group fails at once
	// (ErrPeerClosed) instead of stalling the world's agreement below.
	if g.bg != nil {
		g.bg.Leave()
	}
	if err := w.agree(ctx, "Group.Close", fmt.Sprintf("name=%q", g.name)); err != nil {
		return fmt.Errorf("%w (this rank already told the group's members it is closing it: the group can only be closed now)", err)
	}
	g.closed.Store(true)
	err = g.drop(ctx)
	w.mu.Lock()
	w.groups = slices.DeleteFunc(w.groups, func(x *Group) bool { return x == g })
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("symmem: Close of group %q (rank %d): %w", g.name, w.env.Rank, err)
	}
	return nil
}

// drop releases what the group holds — its staging buffer, its registrations
// (collective over the members) and its backend group — as far as they
// exist, so it also undoes a partially created group.
func (g *Group) drop(ctx context.Context) error {
	var errs []error
	if g.staging.Len > 0 {
		errs = append(errs, g.w.pool.Free(g.staging.Ptr, nil))
	}
	if g.gid >= 0 {
		errs = append(errs, g.w.pool.RemoveGroup(ctx, g.gid))
	}
	if g.bg != nil {
		errs = append(errs, g.bg.Close())
	}
	return errors.Join(errs...)
}

// OpenScope opens a symmetric scope: buffers allocated through it are
// registered with the group when the scope ends. On a non-member the scope
// allocates the same blocks (keeping the pools identical) and registers
// nothing.
func (g *Group) OpenScope() (*Scope, error) {
	if err := g.w.alive(); err != nil {
		return nil, err
	}
	if g.closed.Load() {
		return nil, fmt.Errorf("symmem: group %q: OpenScope: %w", g.name, ErrGroupClosed)
	}
	if !g.IsMember() {
		return &Scope{g: g, ps: g.w.pool.DisabledScope()}, nil
	}
	ps, err := g.w.pool.OpenScope(g.gid)
	if err != nil {
		return nil, fmt.Errorf("symmem: group %q: OpenScope: %w", g.name, err)
	}
	return &Scope{g: g, ps: ps}, nil
}

// Scope is an open symmetric scope of a group.
type Scope struct {
	g  *Group
	ps *pool.Scope
}

// Alloc allocates bytes of symmetric memory (Align-aligned). Every rank must
// make the same Alloc calls in the same order.
func (s *Scope) Alloc(bytes int64) (Buffer, error) {
	b, err := s.g.w.Alloc(bytes)
	if err != nil {
		return Buffer{}, fmt.Errorf("symmem: group %q scope: %w", s.g.name, err)
	}
	return b, nil
}

// End registers the segments the group has not registered yet (collective
// over the group's members, verified across ranks).
func (s *Scope) End(ctx context.Context) (err error) {
	defer markTimeout(&err)
	if err := s.g.w.alive(); err != nil {
		return err
	}
	if err := s.ps.End(ctx); err != nil {
		return fmt.Errorf("symmem: group %q: ending scope: %w", s.g.name, err)
	}
	return nil
}

// Barrier returns once every member of the group has entered it. It is a
// host-side rendezvous through the store (milliseconds): it does not wait
// for device work (Synchronize first).
func (g *Group) Barrier(ctx context.Context) error {
	_, err := g.AllGatherHost(ctx, nil)
	return err
}

// AllGatherHost returns every member's mine, indexed by group rank,
// exchanged through the rendezvous store on the host: for seeds, checks and
// agreement in harnesses, not for data (each call costs store round trips).
// Collective over the group's members.
func (g *Group) AllGatherHost(ctx context.Context, mine []byte) (_ [][]byte, err error) {
	defer markTimeout(&err)
	if err := g.w.alive(); err != nil {
		return nil, err
	}
	if !g.IsMember() {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: rank %d is not a member: %w", g.name, g.w.Rank(), ErrNotMember)
	}
	if g.closed.Load() {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: %w", g.name, ErrGroupClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, g.w.opts.Timeout)
	defer cancel()
	all, err := g.bg.AllGather(ctx, mine)
	if err != nil {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: %w", g.name, err)
	}
	return all, nil
}
