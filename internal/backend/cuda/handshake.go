package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The copy-engine paths (ce, lc) and NCCL calls begin with the handshake
// kernel (ptx/handshake.ptx) where the group has symmem's kernels: one CTA
// that exchanges the call's fingerprint with every peer and compares, in
// the signal region the kernels share (kernel.go). On the copy-engine paths
// it replaces the ready round of stream memory operations (write, wait,
// reset per peer); in front of NCCL, whose kernels cannot compare and would
// wait forever on a peer that called something else, it is one more launch
// on the caller's stream. Stream memory operations cannot branch, so on a
// difference the handshake reports (fault.go) and traps: the copies queued
// behind it never run, on any rank, and the context is lost — the error
// says so. Groups without the kernels (more than kernMaxRanks ranks, no
// JIT) keep the memory-operation round, unchecked in-band (Options.Checked
// covers them).

// hsThreads is the handshake's CTA (ptx/handshake.ptx's .maxntid).
const hsThreads = 32

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

// ready adds the ready round of a copy-engine collective on stream s: the
// handshake for req where the group has the kernels, else the memory
// operations' round.
func (g *Group) ready(p *cudadrv.Program, s uint64, req backend.Request) {
	if g.hsArgs == nil {
		g.signal(p, s, slotReady)
		return
	}
	g.putCheck(g.hsArgs, req)
	p.Launch(s, g.b.kern.hs, g.hsArgs, 1, hsThreads)
}

// handshakeOnly issues the handshake alone on stream s, in front of a path
// with no check of its own (NCCL). The caller holds runMu.
func (g *Group) handshakeOnly(req backend.Request, s uint64) error {
	if g.broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, g.broken)
	}
	p := g.prog
	p.Reset()
	p.SetContext(g.b.ctx)
	g.ready(p, s, req)
	return g.issue(p, s, req, "handshake")
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
		err = fmt.Errorf("%w; the handshake in front of the copy engines stopped the device so that no copy ran: this process's CUDA context is lost, restart it", err)
		g.broken, g.stopped = err, err
	}
	return err
}

// stoppedErr is the mismatch that made the handshake stop the device (nil
// if none): it explains every later launch failure, also after the call
// that reported it.
func (g *Group) stoppedErr() error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.stopped
}
