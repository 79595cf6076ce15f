package cuda

import (
	"context"
	"errors"
	"fmt"
	"github.com/symmem/symmem/internal/errs"
	"strconv"

	"github.com/symmem/symmem/internal/native/cudadrv"
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

// errWorkInFlight is wrapped where the group's collectives did not finish
// within the timeout and what they may still use was kept (Deregister) or
// leaked (Close) rather than pulled from under them.
var errWorkInFlight = errors.New("collectives still in flight")

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

// quiesce waits (bounded by the timeout) until every collective issued so
// far (outside graph capture) finished (streams.quiesce), under runMu.
func (g *core) quiesce(ctx context.Context) error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.st.quiesce(ctx, g.b.stream, g.Timeout)
}

// exchange sends fd to every peer under tag and imports every peer's fd of
// the same size, mapped for this device. Indexed by group rank (0 for me).
func (g *core) exchange(ctx context.Context, tag string, fd int, size int64) ([]uint64, error) {
	bases := make([]uint64, len(g.Ranks))
	err := g.Swap(ctx, tag, fd, func(r, fd int) error {
		p, err := importPeer(g.b.ctx, fd, size, g.b.gran)
		bases[r] = p
		return err
	})
	if err != nil {
		for r, p := range bases {
			if p != 0 && r != g.Me {
				cudadrv.Unmap(g.b.ctx, p, size)
			}
		}
		return nil, err
	}
	return bases, nil
}

// Registered is the number of segments registered with the group.
func (g *Group) Registered() int {
	return g.peers.segs.Len()
}
