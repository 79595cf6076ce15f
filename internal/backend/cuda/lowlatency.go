package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The low-latency path (algorithm ll): one launch of ptx/lowlatency.ptx for
// small all-gathers, reduce-scatters and all-reduces. Each rank pushes its
// data into every peer's LL area (in the signal pad, past the regions the
// other paths use) with the launch's epoch in the same stores, and each
// rank copies or sums what landed in its own area into its output: one
// one-way trip over NVLink, where the kernel path waits for a ready and a
// done round trip. The area is double-buffered by the epoch's parity (the
// PTX header says why that is safe without a ready signal).
//
// Only the pad is symmetric, so the buffers may be any device memory (pool
// blocks or not). Calls need a multiple of 16 bytes per row (an
// all-gather's slice, a reduce-scatter's chunk, an all-reduce's tensor),
// at most llCap. Buffers off 16 bytes set the kernel's bytes flag: it
// loads and stores their vectors byte by byte (staging them through
// copies cost 10 us of host time per eager call). Only the row,
// which every rank passes alike, decides whether ll serves a call, so
// auto's choice never depends on this rank's addresses (ranks whose
// buffers differ mod 16 would otherwise take different paths).
// Lines carry 8 bytes of data in 16, so a row costs twice its bytes: the
// path is for sizes where latency, not bandwidth, sets the time.
const (
	llArea = 128 << 10 // byte offset of the LL area in the pad (kernRegion and lcWords lie below)
	llVec  = 16        // bytes of data per thread and trip: two lines
	// llCap is the row the pad is sized for: tensor-parallel decode's
	// all-reduces reach 512 KiB (64 tokens of a 4096-wide bf16 layer).
	llCap = 1 << 20
)

// llRowSize is the bytes of one source row of an LL half: the header line and
// two lines per 16 bytes of llCap. It depends on nothing a rank could see
// differently (a peer's granularity), so every rank lays rows out alike.
const llRowSize = llLineBytes + 2*llCap

// padBytes is the signal pad's size for n ranks: the regions below llArea
// and the LL area's two halves of n rows, in whole granules.
func padBytes(n int, gran int64) int64 {
	need := llArea + int64(2*n)*llRowSize
	return (need + gran - 1) / gran * gran
}

// llRowOf is the bytes each rank sends each peer (and sums or copies per
// row): an all-gather's slice, a reduce-scatter's chunk, an all-reduce's
// tensor — req.Count elements in each case.
func llRowOf(req backend.Request) int64 { return req.Count * int64(req.DType.Size()) }

// llCTAs is the grid for rows of bytes: one vector per thread (llThreads
// per CTA), at most kernMaxCTAs CTAs (they loop). It depends on bytes
// alone.
func llCTAs(bytes int64) int {
	per := int64(llThreads * llVec)
	return max(1, min(kernMaxCTAs, int((bytes+per-1)/per)))
}

var llKernel = declareKernel("lowlatency.ptx", "symmem_lowlatency")

// ll's own refusals.
const (
	refLLAlign = refOwn + iota // a buffer or the per-rank bytes off 16 bytes
	refLLSize                  // more bytes per rank than its area holds
	refLLAlias                 // input and output overlap, not exactly in place
)

// llPath is the low-latency path: its parameter block (nil without
// kernels).
type llPath struct {
	whole
	g    *core
	row  *pathInfo
	args *cudadrv.Args
}

// check says whether the ll path can run req.
func (l *llPath) check(req *backend.Request) refusal {
	row := llRowOf(*req)
	switch {
	case !l.row.does(req.Kind):
		return refKind
	case l.args == nil:
		return refNoKernels
	case req.Kind != coll.AllGather && !reducible(*req):
		return refOp
	case row%llVec != 0:
		return refLLAlign
	case row > llCap:
		return refLLSize
	case !llAliasOK(*req, l.g.Me):
		return refLLAlias
	}
	return served
}

// llAliasOK reports whether req's buffers are disjoint or exactly in place
// (all-gather: the input is slot me of the output; reduce-scatter: the
// output is chunk me of the input; all-reduce: in == out). A thread sends
// its input vectors before it writes its outputs, but another thread's
// output could overwrite an input vector not yet sent.
func llAliasOK(req backend.Request, me int) bool {
	if req.Out.End() <= req.In.Ptr || req.In.End() <= req.Out.Ptr {
		return true
	}
	row := uint64(llRowOf(req))
	switch req.Kind {
	case coll.AllGather:
		return req.In.Ptr == req.Out.Ptr+uint64(me)*row
	case coll.ReduceScatter:
		return req.Out.Ptr == req.In.Ptr+uint64(me)*row
	}
	return req.In.Ptr == req.Out.Ptr
}

// whyNot says why the ll path cannot run req (nil if it can).
func (l *llPath) whyNot(req backend.Request) error {
	switch r := l.check(&req); r {
	case served:
		return nil
	case refKind:
		return l.row.kindWhy(req.Kind)
	case refOp:
		return fmt.Errorf("ll reduces with sum or avg of float32, bfloat16 or float16, not %v of %v (use nccl): %w", req.Op, req.DType, errs.NotSupported)
	case refLLAlign:
		return fmt.Errorf("ll moves 16-byte vectors: %d bytes per rank is not a multiple of 16: %w (use kernel or nccl)", llRowOf(req), errs.NotSupported)
	case refLLSize:
		return fmt.Errorf("ll holds at most %d bytes per rank, not %d: %w (use kernel or nccl)", llCap, llRowOf(req), errs.NotSupported)
	case refLLAlias:
		return fmt.Errorf("ll needs input and output disjoint or exactly in place, not input %#x (%d bytes) and output %#x (%d bytes): %w (use kernel or nccl)",
			req.In.Ptr, req.In.Len, req.Out.Ptr, req.Out.Len, errs.NotSupported)
	default:
		return kernelsWhyNot(l.g.caps.kernWhy, req, r)
	}
}

func (l *llPath) release() error { freeArgs(l.args); return nil }

func (l *llPath) refuse(c call) error { return refused(c, l.whyNot(c.req)) }

// issue issues c: one launch. The caller holds runMu and has checked
// whyNot.
func (l *llPath) issue(c call) error {
	req := c.req
	l.fill(req)
	p := l.g.newProgram()
	p.Launch(req.Stream, l.g.b.kern.fn(llKernel), l.args, llCTAs(llRowOf(req)), llThreads)
	return l.g.issue(p, &c, "ll")
}

// fill writes req's parameter block (pure: no driver call).
func (l *llPath) fill(req backend.Request) {
	g, a := l.g, l.args
	in, out := req.In.Ptr, req.Out.Ptr
	n, me := len(g.Ranks), g.Me
	row := llRowOf(req)
	flags, stride := reduceFlags(req, false), uint32(0) // reductions: avg or not
	switch req.Kind {
	case coll.AllGather:
		flags = llFlagGather
		if in != out+uint64(int64(me)*row) {
			flags |= llFlagOwn
		}
	case coll.ReduceScatter:
		stride = uint32(row) // peer k gets chunk k
	}
	for r := 0; r < n; r++ {
		a.PutU64(argDst+8*r, g.peers.pads[r]+llArea)
		a.PutU64(argPeerRegion+8*r, g.peers.pads[r]+kernRegion)
	}
	a.PutU64(argIn, in)
	a.PutU64(argSlice, uint64(row))
	a.PutU64(argRegion, g.peers.pads[me]+kernRegion)
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(arDType, arDTypes[req.DType])
	if (in|out)%llVec != 0 {
		flags |= llFlagBytes
	}
	a.PutU32(arFlags, flags)
	a.PutU32(argUnit, llVec)
	a.PutU64(llOut, out)
	a.PutU64(llStride, uint64(stride))
	a.PutU64(llRow, llRowSize)
	g.faults.put(a, req)
}
