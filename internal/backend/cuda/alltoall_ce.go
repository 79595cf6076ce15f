package cuda

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// All-to-all on copy engines (algorithm ce, op all_to_all): every rank
// pushes its block for rank j straight into rank j's output, at the place
// of this rank's block there, through the peer mappings (one copy per
// peer; its own block is a local copy). The ordering is the all-gather's
// push (ce.go): the local copy forks to a side stream, the ready round
// says every peer's output is free, the copies run, and the done round
// says every peer's copies into this rank's output are complete. The
// output must be registered with the group on every rank; the input may
// be any memory of this device.
//
// With host split counts the place of this rank's block in rank j's
// output is the sum of what j receives from the ranks before this one:
// a column of the whole count matrix, which Run exchanges before the call
// (splitMatrix) and checks there on every rank alike.

// errDevSplits refuses device split counts where no path reads them.
var errDevSplits = fmt.Errorf("all-to-all with split counts on the device has no GPU path yet (use host split counts: AllToAllV): %w", errs.NotSupported)

// a2aBlock is one block of this rank's all-to-all, in bytes: src is its
// offset in In, dst its offset in the receiver's Out, n its length.
type a2aBlock struct{ src, dst, n int64 }

// a2aBlocks are the blocks this rank (me of n) sends to each rank: the
// equal form's from req.Count, host splits' from m (m[i][j]: elements
// rank i sends rank j, as splitMatrix returns it).
func a2aBlocks(req backend.Request, n, me int, m [][]int64) (bs [maxCERanks]a2aBlock) {
	es := int64(req.DType.Size())
	if req.A2A.Kind() == backend.SplitsEqual {
		b := req.Count * es
		for j := range n {
			bs[j] = a2aBlock{src: int64(j) * b, dst: int64(me) * b, n: b}
		}
		return bs
	}
	var src int64
	for j := range n {
		var dst int64
		for i := range me {
			dst += m[i][j]
		}
		bs[j] = a2aBlock{src: src * es, dst: dst * es, n: m[me][j] * es}
		src += m[me][j]
	}
	return bs
}

// buildA2A adds c, one all-to-all, to p (pure: no driver call). c.counts
// holds the count matrix with host splits.
func (ce *cePath) buildA2A(p *cudadrv.Program, c *call) error {
	g, req := ce.g, c.req
	n, me := len(g.Ranks), g.Me
	if n > maxCERanks {
		return fmt.Errorf("copy-engine all-to-all supports up to %d ranks, the group has %d", maxCERanks, n)
	}
	if req.A2A.Kind() == backend.SplitsHost && len(c.counts) != n {
		return fmt.Errorf("copy-engine all-to-all with host split counts: %d rows of counts for %d ranks", len(c.counts), n)
	}
	bs := a2aBlocks(req, n, me, c.counts)
	var xs [maxCERanks]xfer
	nx := 0
	// Rotated order (me+1, me+2, ...): transfer i of every rank goes to
	// a different peer.
	for k := 1; k < n; k++ {
		r := (me + k) % n
		b := bs[r]
		if b.n == 0 {
			continue
		}
		dst, ok := g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+b.dst)
		if !ok {
			return fmt.Errorf("copy-engine all-to-all needs the output registered with group %q on every rank: %w", g.GroupName, errNotSymmetric)
		}
		xs[nx] = xfer{dst, req.In.Ptr + uint64(b.src), b.n}
		nx++
	}
	b := bs[me]
	ce.program(p, c, xfer{req.Out.Ptr + uint64(b.dst), req.In.Ptr + uint64(b.src), b.n}, xs[:nx])
	return nil
}

// splitMatrix exchanges the host split counts of an all-to-all among the
// ranks (through the store) and checks them: what rank i sends rank j must
// be what j expects from i. Every rank reads the same counts and finds the
// same first difference, so every rank refuses the call alike before
// anything is queued. It returns m, m[i][j] the elements rank i sends rank
// j, clipped to the request's window [Lo, Hi) where it has one. g is the
// group's members.
func splitMatrix(ctx context.Context, g *members.Head, req backend.Request) ([][]int64, error) {
	n := len(g.Ranks)
	mine := make([]byte, 16*n)
	for j := range n {
		binary.LittleEndian.PutUint64(mine[8*j:], uint64(req.A2A.Send[j]))
		binary.LittleEndian.PutUint64(mine[8*(n+j):], uint64(req.A2A.Recv[j]))
	}
	all := [][]byte{mine}
	if n > 1 {
		var err error
		if all, err = g.AllGather(ctx, mine); err != nil {
			return nil, fmt.Errorf("exchanging the split counts: %w", err)
		}
	}
	return checkSplits(g.Ranks, all, req.A2A.Lo, req.A2A.Hi)
}

// checkSplits reads every rank's counts (n sent, then n expected, 8 bytes
// each, by group rank; ranks are their global ranks) into the count matrix
// and checks that each count sent is the count expected; with hi > 0 the
// counts are clipped to the window [lo, hi).
func checkSplits(ranks []int, all [][]byte, lo, hi int64) ([][]int64, error) {
	n := len(ranks)
	for i, b := range all {
		if len(b) != 16*n {
			return nil, fmt.Errorf("rank %d sent %d bytes of split counts, want %d (is it at another call of the group?): %w", ranks[i], len(b), 16*n, errs.Mismatch)
		}
	}
	at := func(i, k int) int64 { return int64(binary.LittleEndian.Uint64(all[i][8*k:])) }
	m := make([][]int64, n)
	for i := range n {
		m[i] = make([]int64, n)
		for j := range n {
			c, r := at(i, j), at(j, n+i)
			if c != r {
				return nil, fmt.Errorf("rank %d sends %d elements to rank %d, but rank %d expects %d from rank %d (sendCounts[%d] on rank %d must equal recvCounts[%d] on rank %d): %w",
					ranks[i], c, ranks[j], ranks[j], r, ranks[i], j, ranks[i], i, ranks[j], errs.Mismatch)
			}
			if hi > 0 {
				c = min(max(c-lo, 0), hi-lo)
			}
			m[i][j] = c
		}
	}
	return m, nil
}

// a2aWhy says why copy engines cannot run the all-to-all req ("" if they
// can, as far as the all-to-all itself goes).
func a2aWhy(req backend.Request) string {
	switch {
	case req.Kind != coll.AllToAll:
		return ""
	case req.A2A.Kind() == backend.SplitsDevice:
		return "copy engines take host split counts only (split counts on the device have no GPU path yet)"
	case !req.OutSym.OK:
		return "the copy-engine all-to-all writes into the peers' outputs: the output must be a pool block registered with this group"
	}
	return ""
}
