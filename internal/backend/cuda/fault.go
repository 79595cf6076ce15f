package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// In-band argument check of symmem's kernels. Every kernel launch carries a
// 32-bit fingerprint of the call's arguments (backend.Request.Check: kind,
// type, count, op, root, in-place, pool offsets); each CTA sends it with its
// ready signal and compares the one each peer sent before it moves any
// data. On a difference every CTA of every rank ends without touching the
// outputs and writes a report into the group's mapped host words, which the
// host reads on the group's next call and on Synchronize: ErrMismatch on
// every rank, the outputs as they were, the group still usable. It costs
// the host one atomic load per call. Copy engines (ce, lc) and NCCL carry no
// fingerprint: Options.Checked covers them.

// fingerprint folds the call's record and the path that runs it (Run sets
// req.Algo) into 32 bits (FNV-1a): ranks that force other algorithms, or
// whose arguments make auto choose differently, launch different kernels
// that must not pair up (they share one signal region, kernel.go).
func fingerprint(req backend.Request) uint32 {
	h := uint32(2166136261)
	for _, w := range req.Check {
		for i := 0; i < 8; i++ {
			h ^= uint32(byte(w >> (8 * i)))
			h *= 16777619
		}
	}
	for i := 0; i < len(req.Algo); i++ {
		h ^= uint32(req.Algo[i])
		h *= 16777619
	}
	return h
}

// faultErr returns (and clears) the mismatch a kernel of the group reported
// since the last look, nil if none. The caller holds runMu.
func (g *Group) faultErr() error {
	f := g.fault
	if f == nil || f.Load(faultSet) == 0 {
		return nil
	}
	peer, mine, theirs, epoch := int(f.Load(faultPeer)), f.Load(faultMine), f.Load(faultTheirs), f.Load(faultEpoch)
	for i := faultSet; i < faultWords; i++ {
		f.Store(i, 0)
	}
	rank := peer
	if peer >= 0 && peer < len(g.ranks) {
		rank = g.ranks[peer]
	}
	return fmt.Errorf("cuda: group %q: an earlier collective on symmem's kernels (launch %d of that kernel on this group) did nothing: rank %d called it with other arguments than rank %d "+
		"(argument fingerprints %08x vs %08x: kind, type, count, op, root, in-place and pool offsets must match; Options.Checked names the argument); its outputs were not written: %w",
		g.name, epoch, rank, g.ranks[g.me], theirs, mine, errs.Mismatch)
}

// Fault reports a mismatch the group's kernels found since the last call
// (Synchronize asks every group). The usual answer, none, costs one atomic
// load and no lock: it runs after every collective.
func (g *Group) Fault() error {
	if g.fault == nil || g.fault.Load(faultSet) == 0 {
		return nil
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.takeFault()
}

// putCheck writes the header fields every kernel reads the same way: the
// watchdog, the call's fingerprint and where a mismatch is reported.
func (g *Group) putCheck(a *cudadrv.Args, req backend.Request) {
	a.PutU64(argTimeout, uint64(g.b.watchdog.Nanoseconds()))
	a.PutU32(argHash, fingerprint(req))
	var dev uint64
	if g.fault != nil {
		dev = g.fault.Device()
	}
	a.PutU64(argFault, dev)
}
