package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/wait"
)

// Stream-ordered reuse without breaking symmetry.
//
// A block freed with a fence goes back to the free index at once, so where
// later blocks are placed never depends on when a fence completes (which
// differs across ranks). What the fence guards is the memory: an Alloc that
// is handed any byte of a fenced range, and a Trim that releases a segment
// holding one, first wait for that fence. Ranks therefore make identical
// placement decisions and only the waiting differs.

// pending is a freed range whose fence had not completed at Free.
type pending struct {
	seg       *segment
	off, size int64
	fence     Fence
}

// dropDoneLocked forgets fences that have completed.
func (p *Pool) dropDoneLocked() {
	keep := p.pending[:0]
	for _, pd := range p.pending {
		if pd.fence.Done() {
			p.pendingBytes -= pd.size
			continue
		}
		keep = append(keep, pd)
	}
	clear(p.pending[len(keep):])
	p.pending = keep
}

// awaitLocked waits for every pending fence overlapping [off, off+size) of
// s (size < 0: the whole segment) and forgets them. It polls (wait.Until:
// 64 polls that yield after each, then 20 us naps, bounded by the pool's
// timeout): fences are backend events and the pool cannot block on them
// otherwise.
func (p *Pool) awaitLocked(s *segment, off, size int64) error {
	if len(p.pending) == 0 {
		return nil
	}
	overlaps := func(pd pending) bool {
		return pd.seg == s && (size < 0 || (pd.off < off+size && off < pd.off+pd.size))
	}
	err := wait.Until(context.Background(), func() (bool, error) {
		for _, pd := range p.pending {
			if overlaps(pd) && !pd.fence.Done() {
				return false, nil
			}
		}
		return true, nil
	}, &wait.Options{
		Rounds: 64, YieldEvery: 1, Timeout: p.opts.Timeout, Nap: 20 * time.Microsecond, MaxNap: 20 * time.Microsecond,
		Check: func(_ error, expired bool) error {
			if expired {
				return fmt.Errorf("pool: a fence guarding segment %d offset %d did not complete within %v (is the stream that frees it stuck?)",
					s.seg.ID, off, p.opts.Timeout)
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	keep := p.pending[:0]
	for _, pd := range p.pending {
		if overlaps(pd) {
			p.pendingBytes -= pd.size
			continue
		}
		keep = append(keep, pd)
	}
	clear(p.pending[len(keep):])
	p.pending = keep
	return nil
}
