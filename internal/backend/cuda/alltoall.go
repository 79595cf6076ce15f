package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The kernel path's all-to-all (algorithm kernel): one launch of
// alltoall.ptx, which pushes this rank's block for rank k into rank k's
// output through the peer mapping. The equal form's blocks are planned by
// the kernel from the block size; with split counts (host or device) every
// rank publishes its counts and capacities in its signal region, and every
// rank checks the whole matrix on the GPU and plans from it (alltoall_test.go
// has the same computation in Go), so a call needs no host synchronisation and can
// be captured in a CUDA graph. A matrix that is wrong (host counts that
// disagree, device counts past a buffer) makes every rank skip the call
// and report it through the fault words (fault.go: faults.splitsErr).

var a2aKernel = declareKernel("alltoall.ptx", "symmem_alltoall")

// a2aCountCTAs is the grid with split counts: it must be equal on every
// rank, and the counts are not (the equal form sizes it from its blocks).
const a2aCountCTAs = 16

// The kernel path's own refusals (all-to-all).
const (
	refA2AWindow = refOwn + iota // staged rounds (Splits.Hi > 0)
)

// a2aCheck says whether the kernel path can run all-to-all req.
func (k *kernelPath) a2aCheck(req *backend.Request) refusal {
	switch {
	case k.a2a == nil: // allocated with the path's other block (kernArgs)
		return refNoKernels
	case !req.OutSym.OK:
		return refOutNotSym
	case req.A2A != nil && req.A2A.Hi > 0:
		return refA2AWindow
	}
	return served
}

// a2aWhyNot words the all-to-all's own refusals.
func (k *kernelPath) a2aWhyNot(req backend.Request, r refusal) error {
	switch r {
	case refOutNotSym:
		return fmt.Errorf("the all-to-all kernel writes into the peers' outputs, so the output must be a pool block registered with group %q: %w", k.g.GroupName, errNotSymmetric)
	case refA2AWindow:
		return fmt.Errorf("the all-to-all kernel moves whole blocks, not staged rounds of them (elements [%d, %d)); pass symmetric buffers: %w",
			req.A2A.Lo, req.A2A.Hi, errs.NotSupported)
	}
	return kernelsWhyNot(k.g.caps.kernWhy, req, r)
}

// a2aCTAs is the grid of req: the same on every rank (equal digests).
func a2aCTAs(req backend.Request, n int) int {
	if req.A2A.Kind() == backend.SplitsEqual {
		return allGatherCTAs(req.Count*int64(req.DType.Size())*int64(n), kernMaxCTAs)
	}
	return a2aCountCTAs
}

// issueA2A issues all-to-all c: one launch. The caller holds runMu and
// has checked whyNot.
func (k *kernelPath) issueA2A(c call) error {
	if err := k.fillA2A(k.a2a, c.req); err != nil {
		return err
	}
	p := k.g.newProgram()
	p.Launch(c.req.Stream, k.g.b.kern.fn(a2aKernel), k.a2a, a2aCTAs(c.req, len(k.g.Ranks)), kernThreads)
	return k.g.issue(p, &c, "kernel")
}

// fillA2A writes req's parameter block into a (pure: no driver call).
func (k *kernelPath) fillA2A(a *cudadrv.Args, req backend.Request) error {
	g := k.g
	n, me := len(g.Ranks), g.Me
	es := int64(req.DType.Size())
	for r := 0; r < kernMaxRanks; r++ {
		var dst, region uint64
		switch {
		case r == me:
			dst, region = req.Out.Ptr, g.peers.pads[r]+kernRegion
		case r < n:
			var ok bool
			if dst, ok = g.peers.at(req.OutSym.Seg, r, req.OutSym.Off); !ok {
				return fmt.Errorf("kernel all-to-all: output not registered with group %q: %w", g.GroupName, errNotSymmetric)
			}
			region = g.peers.pads[r] + kernRegion
		}
		a.PutU64(argDst+8*r, dst)
		a.PutU64(argPeerRegion+8*r, region)
		var send, recv uint64
		if req.A2A.Kind() == backend.SplitsHost && r < n {
			send, recv = uint64(req.A2A.Send[r]), uint64(req.A2A.Recv[r])
		}
		a.PutU64(a2aSend+8*r, send)
		a.PutU64(a2aRecv+8*r, recv)
	}
	form, block := uint32(a2aFormEqual), uint64(req.Count*es)
	var dev, devOut uint64
	switch req.A2A.Kind() {
	case backend.SplitsHost:
		form, block = a2aFormHost, 0
	case backend.SplitsDevice:
		form, block, dev, devOut = a2aFormDevice, 0, req.A2A.Dev.Ptr, req.A2A.DevOut.Ptr
	}
	a.PutU64(argIn, req.In.Ptr)
	a.PutU64(argSlice, block)
	a.PutU64(argRegion, g.peers.pads[me]+kernRegion)
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(argMask, form)
	a.PutU32(arFlags, 0) // a one-launch call
	a.PutU32(a2aElem, uint32(es))
	a.PutU64(a2aInCap, uint64(req.In.Len/es))
	a.PutU64(a2aOutCap, uint64(req.Out.Len/es))
	a.PutU64(a2aDev, dev)
	a.PutU64(a2aDevOut, devOut)
	g.faults.put(a, req)
	return nil
}
