package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// In checked mode (backend.Request.Checked) the copy-engine paths (ce, lc)
// and NCCL calls run the handshake kernel (ptx/handshake.ptx) beside them
// where the group has symmem's kernels: one CTA, on a stream of its own
// forked from the call's stream at its start, exchanges the call's
// fingerprint (record and path) with every peer and compares, in the signal
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
// call in front of the call or beside it (measured:
// results/gpu-handshake-2026-11-24.md). Groups without the
// kernels (more than kernMaxRanks ranks, no JIT) have no handshake.

// fillHandshake writes the parts of the handshake's parameter block that
// never change for the group (pure: no driver call).
func (g *Group) fillHandshake(a *cudadrv.Args) {
	for r := range g.ranks {
		a.PutU64(argPeerRegion+8*r, g.padPeers[r]+kernRegion)
	}
	a.PutU64(argRegion, g.padPeers[g.me]+kernRegion)
	a.PutU32(argMe, uint32(g.me))
	a.PutU32(argN, uint32(len(g.ranks)))
}

// checkFork starts the handshake for req beside stream s (nothing outside
// checked mode or without the kernels); checkJoin makes s wait for it.
func (g *Group) checkFork(p *cudadrv.Program, s uint64, req backend.Request) {
	if !g.checks(req) {
		return
	}
	g.putCheck(g.hsArgs, req)
	p.Record(s, g.h.checkEv[0])
	p.WaitEvent(g.h.check, g.h.checkEv[0])
	p.Launch(g.h.check, g.b.kern.hs, g.hsArgs, 1, hsThreads)
	p.Record(g.h.check, g.h.checkEv[1])
}

func (g *Group) checkJoin(p *cudadrv.Program, s uint64, req backend.Request) {
	if g.checks(req) {
		p.WaitEvent(s, g.h.checkEv[1])
	}
}

// checks reports whether req runs with the handshake beside it.
func (g *Group) checks(req backend.Request) bool { return req.Checked && g.hsArgs != nil }

// checkAfter joins the handshake into c's stream after NCCL's call (the
// fork went before it, ncclRun.issue). The caller holds runMu.
func (g *Group) checkAfter(c *call) error {
	if g.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, g.broken)
	}
	p := g.newProgram()
	g.checkJoin(p, c.req.Stream, c.req)
	return g.issue(p, c, "handshake")
}

// takeFault returns (and clears) the mismatch the group's kernels reported,
// nil if none. A report of the handshake also breaks the group: it trapped,
// so this process's context is lost. The caller holds runMu.
func (g *Group) takeFault() error {
	rep, ok := g.takeReport()
	if !ok {
		return nil
	}
	err := g.explain(rep)
	if rep.stopped {
		g.broken, g.stopped = err, err
	}
	return err
}

// stoppedErr is the mismatch that made the handshake stop the device (nil
// if none): it explains every later launch failure, also after the call
// that reported it.
func (g *Group) stoppedErr() error {
	if err := g.gateStopped(); err != nil {
		return err // the gate stopped it (gate.go)
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.stopped
}
