package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// symmem's own kernels (PTX written by internal/ptxgen with the offsets in
// kernel_layout.go; see each file's header for its protocol). The driver
// JIT-compiles them once per process for the device at hand.
//
//go:generate go run ./internal/ptxgen
var (
	//go:embed ptx/allgather.ptx
	allGatherPTX []byte
	//go:embed ptx/allreduce.ptx
	allReducePTX []byte
	//go:embed ptx/reducescatter.ptx
	reduceScatterPTX []byte
	//go:embed ptx/handshake.ptx
	handshakePTX []byte
)

// The signal region in each rank's pad that every signalling kernel (all-
// gather, all-reduce, the copy-engine handshake) shares: one launch epoch
// numbers all their launches of the group (a group's collectives run one
// after the other on the GPU, as Run requires), so a rank whose arguments
// send it down another kernel than its peers meets them in the same launch
// header, sees another fingerprint and reports at once instead of waiting in
// its own region until the watchdog. The parameter blocks and the region's
// inside are fixed by the PTX (kernel_layout.go).
const (
	kernRegion = 64 << 10 // byte offset of the kernels' signal region in the pad
	lcWords    = 96 << 10 // ... and of the low-contention reduce-scatter's local words (lowcontention.go)
)

// errKernelAlign is wrapped when the kernel path is forced on buffers it
// cannot move with 16-byte vectors.
var errKernelAlign = errors.New("the kernels need 16-byte aligned buffers and per-rank sizes that are multiples of 16 bytes")

// kernels are the backend's loaded modules (once per backend, lazily: the
// JIT costs tens of milliseconds).
type kernels struct {
	once       sync.Once
	mods       []*cudadrv.Module
	ag, ar, lc cudadrv.Function
	hs         cudadrv.Function // the copy-engine paths' handshake
	guard      cudadrv.Function // the call gate's guard (gate.go)
	err        error
}

func (b *Backend) loadKernels() error {
	k := &b.kern
	k.once.Do(func() {
		type entry struct {
			name string
			fn   *cudadrv.Function
		}
		for _, x := range []struct {
			ptx     []byte
			entries []entry
		}{{allGatherPTX, []entry{{"symmem_allgather_push", &k.ag}}}, {allReducePTX, []entry{{"symmem_allreduce_pull", &k.ar}}},
			{reduceScatterPTX, []entry{{"symmem_reducescatter_lc", &k.lc}}},
			{handshakePTX, []entry{{"symmem_handshake", &k.hs}, {"symmem_gate_guard", &k.guard}}}} {
			var m *cudadrv.Module
			if m, k.err = cudadrv.LoadModule(b.ctx, x.ptx); k.err != nil {
				break
			}
			k.mods = append(k.mods, m)
			for _, e := range x.entries {
				if *e.fn, k.err = m.Function(e.name); k.err != nil {
					break
				}
			}
			if k.err != nil {
				break
			}
		}
		if k.err != nil {
			b.unloadKernels()
		}
	})
	return k.err
}

func (b *Backend) unloadKernels() {
	for _, m := range b.kern.mods {
		m.Unload()
	}
	b.kern.mods = nil
}

// kernVecsPerThread is the work per thread below the CTA limit. Measured on
// 2x H200 (results/gpu-kernel-2026-11-21.md, tune): at 1 MiB total 16
// CTAs took 9.0 us and 64 took 9.9 (each CTA signals every peer), at 16 MiB
// 64 CTAs took 31.7 us and 16 took 34.6.
const kernVecsPerThread = 4

// allGatherCTAs is the grid for a slice: kernVecsPerThread 16-byte vectors per
// thread, at most limit CTAs (they then loop).
func allGatherCTAs(slice int64, limit int) int {
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
	case (req.Kind == coll.AllReduce || req.Kind == coll.ReduceScatter) && g.kargs != nil:
		return g.allReduceWhyNot(req)
	case req.Kind != coll.AllGather && req.Kind != coll.AllReduce && req.Kind != coll.ReduceScatter:
		return fmt.Errorf("the kernels serve all_gather, reduce_scatter and all_reduce, not %v: %w", req.Kind, ErrNotSupported)
	case g.kargs == nil:
		return fmt.Errorf("the kernels are unavailable (%s): %w", g.kernWhy, ErrNotSupported)
	case !req.OutSym.OK:
		return fmt.Errorf("the kernel writes into the peers' outputs, so the output must be a pool block registered with group %q: %w", g.name, errNotSymmetric)
	case slice%kernAlign != 0 || req.In.Ptr%kernAlign != 0 || req.Out.Ptr%kernAlign != 0:
		return fmt.Errorf("slice of %d bytes, input %#x, output %#x: %w (use ce or nccl)", slice, req.In.Ptr, req.Out.Ptr, errKernelAlign)
	}
	return nil
}

// runKernel issues req's kernel (all-gather, all-reduce or reduce-scatter) on stream s: one
// cuLaunchKernel. The caller holds runMu and has checked kernelWhyNot.
func (g *Group) runKernel(req backend.Request, s uint64) error {
	fn, ctas := g.b.kern.ag, 0
	if req.Kind == coll.AllReduce || req.Kind == coll.ReduceScatter {
		if err := g.fillReduction(req); err != nil {
			return err
		}
		fn, ctas = g.b.kern.ar, allReduceCTAs(req.Count*int64(req.DType.Size()))
	} else {
		if err := g.fillAllGatherArgs(g.kargs, req); err != nil {
			return err
		}
		ctas = allGatherCTAs(req.Count*int64(req.DType.Size()), kernMaxCTAs)
	}
	p := g.prog
	p.Reset()
	p.SetContext(g.b.ctx)
	p.Launch(s, fn, g.kargs, ctas, kernThreads)
	return g.issue(p, s, req, "kernel")
}

// issue tracks and executes p, a whole collective on stream s. A failure
// leaves the peers waiting for signals this rank will not send: the group
// cannot go on.
func (g *Group) issue(p *cudadrv.Program, s uint64, req backend.Request, what string) error {
	if err := g.track(p, s); err != nil {
		return err
	}
	if err := p.Exec(); err != nil {
		if ferr := g.takeFault(); ferr != nil { // the handshake trapped: that is why
			return ferr
		}
		g.broken = fmt.Errorf("%v %s failed: %w", req.Kind, what, err)
		return fmt.Errorf("%w: %w", ErrBroken, g.broken)
	}
	return nil
}

// fillAllGatherArgs writes an all-gather's parameter block into a (pure:
// no driver call).
func (g *Group) fillAllGatherArgs(a *cudadrv.Args, req backend.Request) error {
	n, me := len(g.ranks), g.me
	slice := req.Count * int64(req.DType.Size())
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
	a.PutU32(arFlags, 0) // the block may have held an all-reduce's flags
	g.putCheck(a, req)
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
