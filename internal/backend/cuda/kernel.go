package cuda

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The kernel path's kernels (two-shot launches both).
var (
	agKernel = declareKernel("allgather.ptx", "symmem_allgather_push")
	arKernel = declareKernel("allreduce.ptx", "symmem_allreduce_pull")
)

// The signal region in each rank's pad that every signalling kernel (all-
// gather, all-reduce, the copy-engine handshake) shares: one launch epoch
// numbers all their launches of the group (a group's collectives run one
// after the other on the GPU, as Run requires), so a rank whose arguments
// send it down another kernel than its peers meets them in the same launch
// header, sees another digest and reports at once instead of waiting in
// its own region until the watchdog. The parameter blocks and the region's
// inside are fixed by the PTX (kernel_layout.go).
const (
	kernRegion = 64 << 10 // byte offset of the kernels' signal region in the pad
	lcWords    = 96 << 10 // ... and of the low-contention reduce-scatter's local words (lowcontention.go)
)

// errKernelAlign is wrapped when a reduction kernel is forced on a buffer
// whose address is not a multiple of the element size (the all-gather
// kernel moves any bytes; every count and every element-aligned buffer is
// served).
var errKernelAlign = errors.New("symmem's reduction kernels need buffers aligned to the element size")

// agUnit is the all-gather kernel's access width for addresses whose OR is
// or: the largest of 16, 8, 4, 2, 1 that divides every address (P.unit;
// kernel_layout.go). 16 is the fast path (vectors, four in flight per
// thread); narrower units move the same bytes with more instructions, so
// they are slower at large sizes. The slice need not be a multiple: its
// last slice%unit bytes go one by one.
func agUnit(or uint64) uint32 {
	for u := uint64(kernAlign); u > 1; u >>= 1 {
		if or%u == 0 {
			return uint32(u)
		}
	}
	return 1
}

// reduceUnit is the reduction kernels' mode for addresses whose OR is or,
// holding elements of es bytes: 16 (vector mode: 16-byte vectors, then the
// last bytes%16 element by element) when every address is 16-byte aligned,
// else es (element mode: every element alone, several times slower at
// large sizes than vector mode). ok is false when an address is not a
// multiple of es.
func reduceUnit(or uint64, es int) (unit uint32, ok bool) {
	switch {
	case or%kernAlign == 0:
		return kernAlign, true
	case or%uint64(es) == 0:
		return uint32(es), true
	}
	return 0, false
}

// kernVecsPerThread is the work per thread below the CTA limit: fewer CTAs
// are faster for small slices (each CTA signals every peer), more for large
// ones.
const kernVecsPerThread = 4

// allGatherCTAs is the grid for a slice: kernVecsPerThread 16-byte vectors per
// thread, at most limit CTAs (they then loop). It depends on the slice alone,
// never on the unit (which may differ between ranks; their grids may not).
func allGatherCTAs(slice int64, limit int) int {
	v := (slice + kernAlign - 1) / kernAlign
	per := int64(kernThreads * kernVecsPerThread)
	ctas := int((v + per - 1) / per)
	return max(1, min(ctas, limit, kernMaxCTAs))
}

// kernelsWhyNot is the error of the refusals every kernel path shares.
func kernelsWhyNot(kernWhy string, req backend.Request, r refusal) error {
	switch r {
	case refNoKernels:
		return fmt.Errorf("the kernels are unavailable (%s): %w", kernWhy, errs.NotSupported)
	case refOp:
		return fmt.Errorf("%v of %v: %w (use nccl)", req.Op, req.DType, errKernelOp)
	case refHeld:
		return fmt.Errorf("in-place all-reduce of %d bytes: %w (use two-shot, lc or nccl)", req.Count*int64(req.DType.Size()), errKernelOp)
	case refElemAlign:
		return fmt.Errorf("input %#x, output %#x, %v elements: %w (use nccl)", req.In.Ptr, req.Out.Ptr, req.DType, errKernelAlign)
	}
	panic(fmt.Sprintf("cuda: refusal %d has no shared wording", r))
}

// kernelPath is the kernel path (algorithm kernel): one launch of the
// all-gather kernel, of the all-reduce kernel for an all-reduce or a
// reduce-scatter, or of the all-to-all kernel (issueA2A). Its parameter
// block is nil where the group has no kernels (g.caps.kernWhy says why);
// two-shot's first launch shares it.
type kernelPath struct {
	whole
	g    *core
	row  *pathInfo
	args *cudadrv.Args
	a2a  *cudadrv.Args // the all-to-all's block (fillA2A)
}

// loaded reports whether the group has symmem's kernels (the kernel,
// two-shot and lc paths, the handshake).
func (k *kernelPath) loaded() bool { return k.args != nil }

// check says whether the kernel path can run req. Every count and
// alignment of an all-gather is served.
func (k *kernelPath) check(req *backend.Request) refusal {
	switch {
	case (req.Kind == coll.AllReduce || req.Kind == coll.ReduceScatter) && k.loaded():
		return k.allReduceCheck(req)
	case req.Kind == coll.AllToAll:
		return k.a2aCheck(req)
	case !k.row.does(req.Kind):
		return refKind
	case !k.loaded():
		return refNoKernels
	case !req.OutSym.OK:
		return refOutNotSym
	}
	return served
}

// whyNot says why the kernel path cannot run req (nil if it can),
// wrapping errs.NotSupported, errNotSymmetric, errKernelOp or errKernelAlign.
func (k *kernelPath) whyNot(req backend.Request) error {
	switch r := k.check(&req); {
	case r == served:
		return nil
	case req.Kind == coll.AllToAll:
		return k.a2aWhyNot(req, r)
	case r == refKind:
		return k.row.kindWhy(req.Kind)
	case r == refOutNotSym:
		return fmt.Errorf("the kernel writes into the peers' outputs, so the output must be a pool block registered with group %q: %w", k.g.GroupName, errNotSymmetric)
	case r == refInNotSym:
		return fmt.Errorf("the kernel reads the peers' inputs, so the input must be a pool block registered with group %q: %w", k.g.GroupName, errNotSymmetric)
	default:
		return kernelsWhyNot(k.g.caps.kernWhy, req, r)
	}
}

func (k *kernelPath) release() error { freeArgs(k.args, k.a2a); return nil }

func (k *kernelPath) refuse(c call) error { return refused(c, k.whyNot(c.req)) }

// issue issues c's kernel (all-gather, all-reduce, reduce-scatter or
// all-to-all): one cuLaunchKernel. The caller holds runMu and has checked
// whyNot.
func (k *kernelPath) issue(c call) error {
	if c.req.Kind == coll.AllToAll {
		return k.issueA2A(c)
	}
	g, req, s := k.g, c.req, c.req.Stream
	fn, ctas := g.b.kern.fn(agKernel), 0
	if req.Kind == coll.AllReduce || req.Kind == coll.ReduceScatter {
		if err := k.fillReduction(req); err != nil {
			return err
		}
		fn, ctas = g.b.kern.fn(arKernel), allReduceCTAs(req.Count*int64(req.DType.Size()))
	} else {
		if err := k.fillAllGatherArgs(k.args, req); err != nil {
			return err
		}
		ctas = allGatherCTAs(req.Count*int64(req.DType.Size()), kernMaxCTAs)
	}
	p := g.newProgram()
	p.Launch(s, fn, k.args, ctas, kernThreads)
	return g.issue(p, &c, "kernel")
}

// fillAllGatherArgs writes an all-gather's parameter block into a (pure:
// no driver call).
func (k *kernelPath) fillAllGatherArgs(a *cudadrv.Args, req backend.Request) error {
	slice := req.Count * int64(req.DType.Size())
	return k.fillAllGatherAt(a, req, int64(k.g.Me)*slice, slice)
}

// fillAllGatherAt writes the parameter block of an all-gather that pushes
// slice bytes at req.In.Ptr to byte off of every rank's output (req.Out,
// req.OutSym): off is me x slice for an all-gather, the chunk's offset for
// two-shot's second half, whose last chunks may be shorter or empty.
func (k *kernelPath) fillAllGatherAt(a *cudadrv.Args, req backend.Request, off, slice int64) error {
	g := k.g
	n, me := len(g.Ranks), g.Me
	out, in := req.Out.Ptr, req.In.Ptr
	var mask uint32
	or := in
	for r := 0; r < n; r++ {
		var dst uint64
		if r == me {
			dst = out + uint64(off)
			if dst != in {
				mask |= 1 << r // out-of-place: copy into our own slot too
				or |= dst
			}
		} else {
			var ok bool
			if dst, ok = g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+off); !ok {
				return fmt.Errorf("kernel all-gather: output not registered with group %q: %w", g.GroupName, errNotSymmetric)
			}
			mask |= 1 << r
			or |= dst
		}
		a.PutU64(argDst+8*r, dst)
		a.PutU64(argPeerRegion+8*r, g.peers.pads[r]+kernRegion)
	}
	a.PutU64(argIn, in)
	a.PutU64(argSlice, uint64(slice))
	a.PutU32(argUnit, agUnit(or))
	a.PutU64(argRegion, g.peers.pads[me]+kernRegion) // pads[me] is our own pad
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(argMask, mask)
	a.PutU32(arFlags, 0) // the block may have held an all-reduce's flags
	g.faults.put(a, req)
	return nil
}

// allReduceCheck is the kernel path's check of req, an all-reduce or a
// reduce-scatter.
func (k *kernelPath) allReduceCheck(req *backend.Request) refusal {
	switch {
	case !reducible(*req):
		return refOp
	case req.Count*int64(req.DType.Size()) > arMaxBytes && !arDirect(*req, k.g.Me):
		return refHeld
	case !req.InSym.OK:
		return refInNotSym
	case !elemAligned(*req):
		return refElemAlign
	}
	return served
}

// fillAllReduceArgs writes req's parameter block into a (pure: no driver
// call): bytes of output at out, rank r's source at its input plus off.
// A reduce-scatter reads chunk me of every rank's input (off = me x bytes).
// The unit (reduceUnit) comes from every source, as mapped here, and the
// output.
func (k *kernelPath) fillAllReduceArgs(a *cudadrv.Args, req backend.Request, out uint64, off, bytes int64, direct bool) error {
	g := k.g
	n, me := len(g.Ranks), g.Me
	or := out
	for r := 0; r < n; r++ {
		src := req.In.Ptr + uint64(off)
		if r != me {
			var ok bool
			if src, ok = g.peers.at(req.InSym.Seg, r, req.InSym.Off+off); !ok {
				return fmt.Errorf("kernel %v: input not registered with group %q: %w", req.Kind, g.GroupName, errNotSymmetric)
			}
		}
		or |= src
		a.PutU64(arSrc+8*r, src)
		a.PutU64(argPeerRegion+8*r, g.peers.pads[r]+kernRegion)
	}
	unit, ok := reduceUnit(or, req.DType.Size())
	if !ok {
		return fmt.Errorf("kernel %v: output %#x, sources at offset %d: %w", req.Kind, out, req.InSym.Off+off, errKernelAlign)
	}
	a.PutU64(arOut, out)
	a.PutU64(arBytes, uint64(bytes))
	a.PutU64(argRegion, g.peers.pads[me]+kernRegion)
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(arDType, arDTypes[req.DType])
	a.PutU32(arFlags, reduceFlags(req, direct))
	a.PutU32(argUnit, unit)
	g.faults.put(a, req)
	return nil
}

// fillReduction fills the path's block for req on the all-reduce kernel:
// the whole all-reduce, or chunk me for a reduce-scatter.
func (k *kernelPath) fillReduction(req backend.Request) error {
	me := k.g.Me
	bytes := req.Count * int64(req.DType.Size())
	var off int64
	if req.Kind == coll.ReduceScatter {
		off = int64(me) * bytes
	}
	return k.fillAllReduceArgs(k.args, req, req.Out.Ptr, off, bytes, arDirect(req, me))
}

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
