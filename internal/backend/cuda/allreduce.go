package cuda

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The all-reduce kernel (ptx/allreduce.ptx) reads every rank's input through
// the peer mappings and sums in float32, in rank order, once per element: a
// one-shot all-reduce. Pointed at chunk r of every input it is rank r's
// reduce-scatter. Its parameter block has the all-gather's size and shares
// the header, region and timeout offsets (kernel_layout.go).
//
// Any count is served, on any element-aligned buffers: in vector mode
// (every address 16-byte aligned) 16-byte vectors, then the last bytes%16
// element by element; in element mode (reduceUnit) every element alone,
// which is slower at large sizes. Both sum alike, so the bits do not depend
// on the mode.
//
// Results are stored at once (arFlagDirect) unless the output aliases an
// input a peer reads (in-place all-reduce): then every thread holds them
// until the peers have read its input, in shared memory (at most arSlots
// 16-byte vectors, or as many bytes of elements in element mode) and, for
// vector mode's tail, registers, so such a call moves at most arMaxBytes.
// Held results need the same mode on every rank (a CTA writes the elements
// its peers' CTA of the same index read): the output then aliases the
// input at the same pool offset on every rank, so the addresses agree.
const arMaxBytes = kernMaxCTAs * kernThreads * arSlots * kernAlign

// errKernelOp is wrapped when a reduction kernel is forced on an operation,
// type or size it does not implement.
var errKernelOp = errors.New("symmem's reduction kernels do sum and avg of float32, bfloat16 or float16 (in-place all-reduce up to 2 MiB per rank)")

// elemAligned reports whether the reduction kernels can address req's
// buffers: every address a multiple of the element size.
func elemAligned(req backend.Request) bool {
	return (req.In.Ptr|req.Out.Ptr)%uint64(req.DType.Size()) == 0
}

// arDTypes maps the element types the kernel sums to its dtype codes.
var arDTypes = map[coll.DType]uint32{coll.Float32: 0, coll.BFloat16: 1, coll.Float16: 2}

// reducible reports whether symmem's reduction kernels reduce req's op and
// type.
func reducible(req backend.Request) bool {
	_, typeOK := arDTypes[req.DType]
	return (req.Op == coll.Sum || req.Op == coll.Avg) && typeOK
}

// reduceFlags are the kernel flags for req's op (avg) and store mode.
func reduceFlags(req backend.Request, direct bool) uint32 {
	var f uint32
	if direct {
		f |= arFlagDirect
	}
	if req.Op == coll.Avg {
		f |= arFlagAvg
	}
	return f
}

// arDirect reports whether the kernel may store req's results at once: its
// output overlaps no input a peer reads. A reduce-scatter's peers read the
// chunks other than me, so its in-place output (chunk me) qualifies.
func arDirect(req backend.Request, me int) bool {
	bytes := req.Count * int64(req.DType.Size())
	if req.Kind == coll.ReduceScatter && req.Out.Ptr == req.In.Ptr+uint64(int64(me)*bytes) {
		return true
	}
	return req.Out.End() <= req.In.Ptr || req.In.End() <= req.Out.Ptr
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

// allReduceCTAs is the grid: one vector per thread up to 64 CTAs (512
// KiB), then they loop (held calls at most four times: arMaxBytes). It
// depends on bytes alone, which every rank must pass alike (two-shot: the
// common chunk, not this rank's possibly shorter one), never on the mode.
// Every
// vector waits on a read over NVLink, so many threads with one each beat few
// with four.
func allReduceCTAs(bytes int64) int {
	per := int64(kernThreads * kernAlign)
	return max(1, min(kernMaxCTAs, int((bytes+per-1)/per)))
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
