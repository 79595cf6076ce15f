package cuda

import (
	"errors"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
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

// allReduceSplit is the chunk, in elements, that each of n ranks reduces of
// an all-reduce of count elements of es bytes (two-shot, lc): ceil(count/n)
// rounded up to whole 16-byte vectors, so that every chunk starts 16-byte
// aligned when the buffers are. Rank r owns [r*c, min((r+1)*c, count)):
// the last chunks may be shorter, or empty. A count divisible by n into
// chunks of whole vectors splits as before, count/n each.
func allReduceSplit(count int64, n, es int) int64 {
	per := int64(max(1, kernAlign/es))
	c := (count + int64(n) - 1) / int64(n)
	return (c + per - 1) / per * per
}

// chunkOf is the part of req group rank me of ranks reduces, in bytes:
// chunk, the common size (a reduce-scatter's output, an all-reduce's
// allReduceSplit), which sizes grids and sub-chunks alike on every rank;
// off, this rank's offset in the tensor; n, its length (an all-reduce's
// last chunks are shorter or empty: 0 <= n <= chunk).
func chunkOf(req backend.Request, ranks, rank int) (chunk, off, n int64) {
	es := int64(req.DType.Size())
	me := int64(rank)
	if req.Kind == coll.ReduceScatter {
		chunk = req.Count * es
		return chunk, me * chunk, chunk
	}
	chunk = allReduceSplit(req.Count, ranks, int(es)) * es
	total := req.Count * es
	off = min(me*chunk, total)
	return chunk, off, min(chunk, total-off)
}
