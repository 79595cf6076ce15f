package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// In checked mode (backend.Request.Checked) the copy-engine paths (ce, lc)
// and NCCL calls run the handshake kernel (ptx/handshake.ptx) beside them
// where the group has symmem's kernels: one CTA, on a stream of its own
// forked from the call's stream at its start, exchanges the call's
// digest (record and path) with every peer and compares, in the signal
// region the kernels share (kernel.go); the call's stream joins it before
// its last step (the done round, or right after the NCCL call), so no call
// completes before its check passed. Stream memory operations and NCCL's
// kernels cannot compare or branch, so on a difference the handshake
// reports (fault.go) and traps: the context is lost on every rank (each
// compares with every peer), waits that would never end (a peer on another
// path) end with it, and nothing ordered after the call runs. Eager calls
// are compared by the call gate too (gate.go); the handshake adds replays
// of CUDA graphs that differ between the ranks, which the gate compares
// only when they are captured.
//
// It is not always on because it is not free: it puts a kernel launch on
// the call's critical path, several microseconds per copy-engine or NCCL
// call in front of the call or beside it. Groups without the kernels (more
// than kernMaxRanks ranks, no JIT) have no handshake.

// hsKernel runs beside the copy-engine paths and NCCL.
var hsKernel = declareKernel("handshake.ptx", "symmem_handshake")

// checkedHandshake is a group's handshake in checked mode: its parameter
// block (nil: the group has no kernels, so no handshake), and the raw
// handles of its stream and of the events that fork and join it (the
// group owns them: setupCE).
type checkedHandshake struct {
	g      *core
	args   *cudadrv.Args
	stream uint64
	ev     [2]uint64 // fork, join
}

// fill writes the parts of the parameter block that never change for the
// group (pure: no driver call).
func (h *checkedHandshake) fill() {
	g, a := h.g, h.args
	for r := range g.Ranks {
		a.PutU64(argPeerRegion+8*r, g.peers.pads[r]+kernRegion)
	}
	a.PutU64(argRegion, g.peers.pads[g.Me]+kernRegion)
	a.PutU32(argMe, uint32(g.Me))
	a.PutU32(argN, uint32(len(g.Ranks)))
}

// on reports whether req runs with the handshake beside it.
func (h *checkedHandshake) on(req backend.Request) bool { return req.Checked && h.args != nil }

// fork starts the handshake for req beside stream s (nothing outside
// checked mode or without the kernels); join makes s wait for it.
func (h *checkedHandshake) fork(p *cudadrv.Program, s uint64, req backend.Request) {
	if !h.on(req) {
		return
	}
	h.g.faults.put(h.args, req)
	p.Record(s, h.ev[0])
	p.WaitEvent(h.stream, h.ev[0])
	p.Launch(h.stream, h.g.b.kern.fn(hsKernel), h.args, 1, hsThreads)
	p.Record(h.stream, h.ev[1])
}

func (h *checkedHandshake) join(p *cudadrv.Program, s uint64, req backend.Request) {
	if h.on(req) {
		p.WaitEvent(s, h.ev[1])
	}
}

// after joins the handshake into c's stream after NCCL's call (the fork
// went before it, ncclRun.issue). The caller holds runMu.
func (h *checkedHandshake) after(c *call) error {
	g := h.g
	if g.broken != nil {
		return fmt.Errorf("%w: %w", errs.Broken, g.broken)
	}
	p := g.newProgram()
	h.join(p, c.req.Stream, c.req)
	return g.issue(p, c, "handshake")
}

// stoppedErr is the mismatch that made the handshake stop the device (nil
// if none): it explains every later launch failure, also after the call
// that reported it.
func (g *core) stoppedErr() error {
	if err := g.gate.stoppedErr(); err != nil {
		return err // the gate stopped it (gate.go)
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.faults.stopped
}
