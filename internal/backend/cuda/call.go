package cuda

import (
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// call is one collective on its way through Run: built there once and
// passed down, so no step depends on state another step left in the group.
type call struct {
	// req is the request as it runs: Algo is the path chosen (in the
	// digest, fault.go, and the gate's entry, gate.go), Stream the
	// stream it runs on (the backend's when the caller gave none).
	req backend.Request
	// win: both buffers lie in NCCL windows, decided once for the choice
	// and for NCCL; verdict is what NCCL's symmetric kernels make of the
	// call there (ncclwindow.go; windowGood off windows).
	win     bool
	verdict windowVerdict
	// gate is its place at the call gate, set by publish.
	gate ticket
	// counts is an all-to-all's count matrix with host split counts
	// (splitMatrix: counts[i][j], elements rank i sends rank j).
	counts [][]int64
}

// newCall is req as a call, its buffers in NCCL windows or not (win),
// judged against NCCL version v (0: none).
func newCall(req backend.Request, win bool, v int) call {
	win = win && req.Kind != coll.AllToAll // nccl-window does not serve it
	c := call{req: req, win: win}
	if win {
		c.verdict = judgeWindow(req, v)
	}
	return c
}

// buffersSymmetric reports whether req's buffers are pool blocks registered
// with the group (a broadcast's output only: it has no input of its own).
func buffersSymmetric(req backend.Request) bool {
	return req.OutSym.OK && (req.InSym.OK || req.Kind == coll.Broadcast)
}

// ticket is a call's place at the call gate (gate.go): its number, and the
// number its stream waits for before it runs (0: none, it was approved at
// publish, or the group has no gate).
type ticket struct{ n, wait uint64 }
