package cuda

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// The all-reduce kernel (ptx/allreduce.ptx) reads every rank's input through
// the peer mappings and sums in float32, in rank order, once per element: a
// one-shot all-reduce for small messages. Pointed at chunk r of every input
// it is rank r's reduce-scatter. Its parameter block has the all-gather's
// size and shares the header, region and timeout offsets (kernel_layout.go).
//
// arMaxBytes is what one pass holds: every thread keeps at most arSlots
// 16-byte results in shared memory until the peers have read its input.
const arMaxBytes = kernMaxCTAs * kernThreads * arSlots * kernAlign

// errKernelOp is wrapped when the all-reduce kernel is forced on an
// operation, type or size it does not implement.
var errKernelOp = errors.New("the all-reduce / reduce-scatter kernel sums float32, bfloat16 or float16, up to 2 MiB of output per rank")

// arDTypes maps the element types the kernel sums to its dtype codes.
var arDTypes = map[coll.DType]uint32{coll.Float32: 0, coll.BFloat16: 1, coll.Float16: 2}

// allReduceWhyNot says why the all-reduce kernel cannot run req, an
// all-reduce or a reduce-scatter (nil if it can).
func (g *Group) allReduceWhyNot(req backend.Request) error {
	bytes := req.Count * int64(req.DType.Size()) // output bytes per rank
	_, typeOK := arDTypes[req.DType]
	switch {
	case req.Op != coll.Sum || !typeOK:
		return fmt.Errorf("%v of %v: %w (use nccl)", req.Op, req.DType, errKernelOp)
	case bytes > arMaxBytes:
		return fmt.Errorf("%d bytes: %w (use nccl)", bytes, errKernelOp)
	case !req.InSym.OK:
		return fmt.Errorf("the kernel reads the peers' inputs, so the input must be a pool block registered with group %q: %w", g.name, errNotSymmetric)
	case bytes%kernAlign != 0 || req.In.Ptr%kernAlign != 0 || req.Out.Ptr%kernAlign != 0:
		return fmt.Errorf("%d bytes, input %#x, output %#x: %w (use nccl)", bytes, req.In.Ptr, req.Out.Ptr, errKernelAlign)
	}
	return nil
}

// allReduceCTAs is the grid: one vector per thread up to 64 CTAs (512
// KiB), then up to four (allReduceWhyNot bounds the size by arMaxBytes).
// Every vector waits on a read over NVLink, so many threads with one each
// beat few with four: 1 CTA with 4 vectors per thread took 11.9 us at 32 KiB
// on 2x H200 where 1 CTA with 2 took 9.0 at 16 KiB (gpu-kernel-2026-11-21.md, run 11).
func allReduceCTAs(bytes int64) int {
	per := int64(kernThreads * kernAlign)
	return max(1, min(kernMaxCTAs, int((bytes+per-1)/per)))
}

// fillAllReduceArgs writes req's parameter block (pure: no driver call).
// Reduce-scatter reads chunk me of every rank's input.
func (g *Group) fillAllReduceArgs(req backend.Request) error {
	n, me := len(g.ranks), g.me
	a := g.kargs
	var off int64
	if req.Kind == coll.ReduceScatter {
		off = int64(me) * req.Count * int64(req.DType.Size())
	}
	for r := 0; r < n; r++ {
		src := req.In.Ptr + uint64(off)
		if r != me {
			var ok bool
			if src, ok = g.peer(req.InSym.Seg, r, req.InSym.Off+off); !ok {
				return fmt.Errorf("kernel %v: input not registered with group %q: %w", req.Kind, g.name, errNotSymmetric)
			}
		}
		a.PutU64(arSrc+8*r, src)
		a.PutU64(argPeerRegion+8*r, g.padPeers[r]+arRegion)
	}
	a.PutU64(arOut, req.Out.Ptr)
	a.PutU64(arBytes, uint64(req.Count*int64(req.DType.Size())))
	a.PutU64(argRegion, g.padPeers[me]+arRegion)
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(arDType, arDTypes[req.DType])
	a.PutU64(argTimeout, uint64(g.b.watchdog.Nanoseconds()))
	return nil
}
