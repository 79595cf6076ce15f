package cuda

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
)

// An all-to-all's split counts: Run exchanges and checks host split
// counts before the call (splitMatrix), on every rank alike; split counts
// on the device are read by the kernel path alone (kernel.go).

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
