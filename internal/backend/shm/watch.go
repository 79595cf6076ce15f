package shm

import (
	"fmt"
	"sync/atomic"

	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
)

// failFast returns the error that broke the group, if one did: a store
// exchange would otherwise wait the whole timeout for peers that no longer
// take part. Peers that exited, closed or failed are found by the
// exchange's watch (gone), within members.watchTick.
func (g *Group) failFast() error {
	if err := g.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// gone returns why group rank r takes no more part in the group's calls:
// its process exited (*PeerExitedError), it is closing (errs.PeerClosed;
// not counted when this rank is leaving too) or a call failed midway on it
// (errs.Broken). The caller holds runMu or runs inside an AllGather (Close
// waits for both before it unmaps the pads).
func (g *Group) gone(r int, leaving bool) error {
	return members.Gone(g.Ranks, g.Me, r, leaving, g.exited, func(q int) uint64 { return uint64(atomic.LoadUint32(g.pads.state(q))) })
}

// watchable is gone for the group's store exchanges, once setup mapped
// the peers' pads (nil before).
func (g *Group) watchable(r int, leaving bool) error {
	if !g.ready.Load() {
		return nil
	}
	return g.gone(r, leaving)
}

// alive is gone for the waits of a collective or scope end.
func (g *Group) alive(r int) error { return g.gone(r, false) }

// Leave tells the peers that this rank is closing (World.Close or
// Group.Close): their waits for it fail at once with errs.PeerClosed,
// except the teardown's exchanges they make too. Not under runMu: a collective of another
// goroutine may hold it, waiting for a peer this wakes.
func (g *Group) Leave() {
	g.Gather.Leave()
	g.pads.setState(members.StateLeft)
}

// breakOn marks the group broken by err (the caller holds runMu) and tells
// the peers, whose waits for this rank then fail at once.
func (g *Group) breakOn(err error) {
	g.broken = fmt.Errorf("shm: group %q: %w (after: %v)", g.GroupName, errs.Broken, err)
	e := g.broken
	g.failed.Store(&e)
	g.pads.setState(members.StateFailed)
}
