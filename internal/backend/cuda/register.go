package cuda

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/pool"
)

// Registered segments: the registration agreement, every rank's mapping of
// each (kept in peerTable, peers.go), and the quiescing that makes
// deregistration and close safe.

// Register makes seg usable by the group's collectives: peers' copies are
// mapped here (copy engines) and the segment becomes an NCCL window. It is
// collective; ranks that register different segments get an error wrapping
// errs.Mismatch (never a hang).
func (g *Group) Register(ctx context.Context, seg pool.Segment) error {
	if err := g.peers.segs.Fresh(g.GroupName, seg.ID); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	fd, size, err := g.b.prov.fd(seg.ID)
	if err != nil {
		return fmt.Errorf("cuda: group %q: register: %w", g.GroupName, err)
	}
	if size != seg.Size {
		return fmt.Errorf("cuda: group %q: register segment %d: pool says %d bytes, provider %d", g.GroupName, seg.ID, seg.Size, size)
	}
	mine := fmt.Sprintf("register seg=%d size=%d", seg.ID, seg.Size)
	all, err := g.AllGather(ctx, []byte(mine))
	if err != nil {
		return fmt.Errorf("cuda: group %q: register segment %d: %w", g.GroupName, seg.ID, err)
	}
	for r, v := range all {
		if string(v) != mine {
			return fmt.Errorf("%w: group %q: rank %d is at %q while rank %d is at %q: every rank must register the same segments in the same order",
				errs.Mismatch, g.GroupName, g.Ranks[r], v, g.Ranks[g.Me], mine)
		}
	}
	ps := &peerSeg{size: seg.Size, bases: make([]uint64, len(g.Ranks))}
	if g.caps.ce && len(g.Ranks) > 1 {
		if ps.bases, err = g.exchange(ctx, "seg/"+strconv.FormatUint(uint64(seg.ID), 10), fd, seg.Size); err != nil {
			return fmt.Errorf("cuda: group %q: register segment %d: %w", g.GroupName, seg.ID, err)
		}
	}
	ps.bases[g.Me] = seg.Base
	if err := g.nccl.register(ctx, seg); err != nil {
		return fmt.Errorf("cuda: group %q: register segment %d: %w", g.GroupName, seg.ID, errors.Join(err, ps.unmap(g.b.ctx, g.Me)))
	}
	// The segment becomes the group's only once the hier path's children
	// have it too: where one fails the group undoes its part (no call has
	// used the segment yet), so that the pool, which counts it as not
	// registered, can register it again.
	if err := g.paths.hier.register(ctx, seg); err != nil {
		return fmt.Errorf("cuda: group %q: register segment %d: %w", g.GroupName, seg.ID, errors.Join(err, g.nccl.deregister(ctx, seg), ps.unmap(g.b.ctx, g.Me)))
	}
	g.peers.segs.Add(seg.ID, ps)
	return nil
}

// Deregister waits until the group's last collective finished (bounded by
// the timeout), then unmaps the peers' copies of seg and drops its window.
func (g *Group) Deregister(ctx context.Context, seg pool.Segment) error {
	ps, ok := g.peers.segs.Get(seg.ID)
	if !ok {
		return fmt.Errorf("cuda: group %q: deregister of segment %d, which is not registered", g.GroupName, seg.ID)
	}
	// Work still running may read the peers' copies or the window:
	// unmapping them under it faults the context (an illegal address). The
	// segment stays registered, as the pool then counts it: a later
	// Deregister tries again, and Close leaks the mappings if the work
	// never ends. The hier children quiesce their own calls (the group's
	// hier calls are theirs).
	if err := g.quiesce(ctx); err != nil {
		return fmt.Errorf("cuda: group %q: deregister segment %d: %w, so it stays registered (mappings and window kept): %w", g.GroupName, seg.ID, errWorkInFlight, err)
	}
	herr := g.paths.hier.deregister(ctx, seg)
	if errors.Is(herr, errWorkInFlight) {
		return fmt.Errorf("cuda: group %q: deregister segment %d: a hier child group has %w, so it stays registered: %w", g.GroupName, seg.ID, errWorkInFlight, herr)
	}
	g.peers.segs.Remove(seg.ID)
	if err := errors.Join(herr, g.nccl.deregister(ctx, seg), ps.unmap(g.b.ctx, g.Me)); err != nil {
		return fmt.Errorf("cuda: group %q: deregister segment %d: %w", g.GroupName, seg.ID, err)
	}
	return nil
}

// Registered is the number of segments registered with the group.
func (g *Group) Registered() int {
	return g.peers.segs.Len()
}
