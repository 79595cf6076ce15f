package cuda

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/pool"
)

// peerTable is what a group maps of its members' memory, by group rank:
// every rank's signal pad and every registered segment. Register,
// Deregister and Close change it; the paths read it.
type peerTable struct {
	segs members.Segments[*peerSeg] // registered segments
	pad  *segment                   // this rank's signal pad
	pads []uint64                   // every rank's pad as mapped here (pads[me] = pad.base)
}

// peerSeg is every rank's mapping of one registered segment.
type peerSeg struct {
	size  int64
	bases []uint64 // by group rank; bases[me] is this rank's own segment
}

// at returns rank r's address of segment seg at offset off.
func (pt *peerTable) at(seg pool.SegmentID, r int, off int64) (uint64, bool) {
	ps, ok := pt.segs.Get(seg)
	if !ok || ps.bases[r] == 0 {
		return 0, false
	}
	return ps.bases[r] + uint64(off), true
}

// word is the address of pad word (slot, from) in rank r's pad (pads has
// one per rank).
func (pt *peerTable) word(r, slot, from int) uint64 {
	return pt.pads[r] + uint64(4*(slot*len(pt.pads)+from))
}

// createPad creates this rank's signal pad of size bytes (padBytes),
// cleared; the group exchanges it then (mapped).
func (pt *peerTable) createPad(c *cudadrv.Context, size, gran int64) error {
	var err error
	if pt.pad, err = createLocal(c, size, gran); err != nil {
		return fmt.Errorf("signal pad: %w", err)
	}
	if err := cudadrv.Memset8(c, pt.pad.base, 0, pt.pad.size); err != nil {
		return fmt.Errorf("clearing the signal pad: %w", err)
	}
	return nil
}

// releaseSegs drops every segment and unmaps the peers' copies, appending
// each failure to errs.
func (pt *peerTable) releaseSegs(errs []error, c *cudadrv.Context, me int) []error {
	for _, ps := range pt.segs.Drain() {
		errs = append(errs, ps.unmap(c, me))
	}
	return errs
}

// releasePads unmaps the peers' pads and releases this rank's, appending
// each failure to errs.
func (pt *peerTable) releasePads(errs []error, c *cudadrv.Context, me int) []error {
	for r, p := range pt.pads {
		if r != me && p != 0 {
			errs = append(errs, cudadrv.Unmap(c, p, pt.pad.size))
		}
	}
	if pt.pad != nil {
		errs = append(errs, pt.pad.release(c))
	}
	return errs
}

// unmap unmaps the peers' copies, every one even where some fail.
func (ps *peerSeg) unmap(c *cudadrv.Context, me int) error {
	var errs []error
	for r, p := range ps.bases {
		if r != me && p != 0 {
			errs = append(errs, cudadrv.Unmap(c, p, ps.size))
		}
	}
	return errors.Join(errs...)
}
