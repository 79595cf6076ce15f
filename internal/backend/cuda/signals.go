package cuda

import "github.com/symmem/symmem/internal/native/cudadrv"

// The signals the copy-engine paths (ce, lc) share: a signal round through
// the pads' words (peerTable.word). Copies spread over the side streams are
// streams.transfers.

// pad layout: word (slot, from) at 4*(slot*n + from); slots below.
const (
	slotReady = 0
	slotDone  = 1
	padSlots  = 2
)

// maxCERanks bounds the group size of the copy-engine path (fixed arrays
// keep the issue path free of allocations).
const maxCERanks = 64

// xfer is one copy: n bytes from src to dst.
type xfer struct {
	dst, src uint64
	n        int64
}

// Signals of the copy-engine path carry no epoch, so a call captured into a
// CUDA graph replays correctly: a rank writes 1 into its word of each peer's
// pad, waits until every peer's word in its own pad is 1, and sets those
// words back to 0 before it goes on. Rank r writes word (slot, r) of rank p's
// pad for call k+1 only after it saw p's done of call k, which p wrote after
// resetting that word for call k (writes are fenced, in stream order), so a
// 1 is never lost to a late reset; the same holds for the done words.
const signalOn = 1

// signal adds one signal round on slot for rank me: tell every peer, wait
// for every peer, reset the words waited on.
func (pt *peerTable) signal(p *cudadrv.Program, s uint64, slot, me int) {
	n := len(pt.pads)
	for r := 0; r < n; r++ {
		if r != me {
			p.Write32(s, pt.word(r, slot, me), signalOn)
		}
	}
	for r := 0; r < n; r++ {
		if r != me {
			p.Wait32EQ(s, pt.word(me, slot, r), signalOn)
		}
	}
	for r := 0; r < n; r++ {
		if r != me {
			p.Write32(s, pt.word(me, slot, r), 0)
		}
	}
}
