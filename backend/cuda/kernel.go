package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/symmem/symmem/backend"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
)

// allGatherPTX is symmem's own all-gather kernel (hand-written PTX, see the
// file's header for the protocol). The driver JIT-compiles it once per
// process for the device at hand.
//
//go:embed ptx/allgather.ptx
var allGatherPTX []byte

// Kernel signal region in each rank's pad, and the kernel's limits; the
// offsets inside the region and the parameter block are fixed by the PTX.
const (
	kernRegion   = 64 << 10 // byte offset of the region in the pad
	kernMaxCTAs  = 64       // counters and flags exist for CTAs 0..63
	kernMaxRanks = 8        // targets in the parameter block
	kernArgBytes = 176
	kernThreads  = 512
	kernAlign    = 16 // the kernel moves 16-byte vectors

	argIn, argSlice, argRegion = 0, 8, 16
	argMe, argN, argMask       = 24, 28, 32
	argDst, argPeerRegion      = 40, 104
	argTimeout                 = 168
)

// errKernelAlign is wrapped when the kernel path is forced on buffers it
// cannot move with 16-byte vectors.
var errKernelAlign = errors.New("the kernel all-gather needs 16-byte aligned buffers and a slice that is a multiple of 16 bytes")

// kernels is the backend's loaded module (once per backend, lazily: the JIT
// costs tens of milliseconds).
type kernels struct {
	once sync.Once
	mod  *cuda.Module
	ag   cuda.Function
	err  error
}

func (b *Backend) loadKernels() error {
	k := &b.kern
	k.once.Do(func() {
		if k.mod, k.err = cuda.LoadModule(b.ctx, allGatherPTX); k.err != nil {
			return
		}
		if k.ag, k.err = k.mod.Function("symmem_allgather_push"); k.err != nil {
			k.mod.Unload()
			k.mod = nil
		}
	})
	return k.err
}

func (b *Backend) unloadKernels() {
	if b.kern.mod != nil {
		b.kern.mod.Unload()
		b.kern.mod = nil
	}
}

// kernVecsPerThread is the work per thread below the CTA limit. Measured on
// 2x H200 (bench/results/gpu-kernel-2026-11-21.md, tune): at 1 MiB total 16
// CTAs took 9.0 us and 64 took 9.9 (each CTA signals every peer), at 16 MiB
// 64 CTAs took 31.7 us and 16 took 34.6.
const kernVecsPerThread = 4

// kernelCTAs is the grid for a slice: kernVecsPerThread 16-byte vectors per
// thread, at most limit CTAs (they then loop).
func kernelCTAs(slice int64, limit int) int {
	v := slice / kernAlign
	per := int64(kernThreads * kernVecsPerThread)
	ctas := int((v + per - 1) / per)
	return max(1, min(ctas, limit, kernMaxCTAs))
}

// kernelWhyNot says why the kernel path cannot run req (nil if it can),
// wrapping ErrNotSupported, errNotSymmetric or errKernelAlign.
func (g *Group) kernelWhyNot(req backend.Request) error {
	slice := req.Count * int64(req.DType.Size())
	switch {
	case req.Kind != coll.AllGather:
		return fmt.Errorf("the kernel serves all_gather only: %w", ErrNotSupported)
	case g.kargs == nil:
		return fmt.Errorf("the all-gather kernel is unavailable (%s): %w", g.kernWhy, ErrNotSupported)
	case !req.OutSym.OK:
		return fmt.Errorf("the kernel writes into the peers' outputs, so the output must be a pool block registered with group %q: %w", g.name, errNotSymmetric)
	case slice%kernAlign != 0 || req.In.Ptr%kernAlign != 0 || req.Out.Ptr%kernAlign != 0:
		return fmt.Errorf("slice of %d bytes, input %#x, output %#x: %w (use ce or nccl)", slice, req.In.Ptr, req.Out.Ptr, errKernelAlign)
	}
	return nil
}

// kernelAllGather issues one all-gather kernel on stream s. The caller holds
// runMu and has checked kernelWhyNot.
func (g *Group) kernelAllGather(req backend.Request, s uint64) error {
	if err := g.fillKernelArgs(req); err != nil {
		return err
	}
	slice := req.Count * int64(req.DType.Size())
	p := g.prog
	p.Reset()
	p.SetContext(g.b.ctx)
	p.Launch(s, g.b.kern.ag, g.kargs, kernelCTAs(slice, g.tune.kernCTAs), kernThreads)
	if err := p.Exec(); err != nil {
		// The peers' CTAs now wait for ours: the group cannot go on.
		g.broken = fmt.Errorf("all-gather kernel launch failed: %w", err)
		return fmt.Errorf("%w: %w", ErrBroken, g.broken)
	}
	g.noteStream(s)
	return nil
}

// fillKernelArgs writes req's parameter block (pure: no driver call).
func (g *Group) fillKernelArgs(req backend.Request) error {
	n, me := len(g.ranks), g.me
	slice := req.Count * int64(req.DType.Size())
	a := g.kargs
	out, in := req.Out.Ptr, req.In.Ptr
	var mask uint32
	for r := 0; r < n; r++ {
		var dst uint64
		if r == me {
			dst = out + uint64(int64(me)*slice)
			if dst != in {
				mask |= 1 << r // out-of-place: copy into our own slot too
			}
		} else {
			var ok bool
			if dst, ok = g.peer(req.OutSym.Seg, r, req.OutSym.Off+int64(me)*slice); !ok {
				return fmt.Errorf("kernel all-gather: output not registered with group %q: %w", g.name, errNotSymmetric)
			}
			mask |= 1 << r
		}
		a.PutU64(argDst+8*r, dst)
		a.PutU64(argPeerRegion+8*r, g.padPeers[r]+kernRegion)
	}
	a.PutU64(argIn, in)
	a.PutU64(argSlice, uint64(slice))
	a.PutU64(argRegion, g.padPeers[me]+kernRegion) // padPeers[me] is our own pad
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(argMask, mask)
	a.PutU64(argTimeout, uint64(g.timeout.Nanoseconds()))
	return nil
}

// loadKernel loads the backend's module if the group may use it, and says
// whether it can (kernWhy says why not).
func (g *Group) loadKernel() bool {
	if len(g.ranks) > kernMaxRanks {
		g.kernWhy = fmt.Sprintf("more than %d ranks", kernMaxRanks)
		return false
	}
	if err := g.b.loadKernels(); err != nil {
		g.kernWhy = err.Error()
		return false
	}
	return true
}
