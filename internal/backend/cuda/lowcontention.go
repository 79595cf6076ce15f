package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The low-contention reduce-scatter (algorithm lc): copy engines pull every
// peer's chunk for this rank into local staging, sub-chunk by sub-chunk, one
// side stream per peer, while the reduction kernel (ptx/reducescatter.ptx)
// runs on a few CTAs beside them and sums each sub-chunk as it lands. The
// bytes cross NVLink without SMs; the sums take Options.LowContentionCTAs
// CTAs. PyTorch's _low_contention_reduce_scatter pulls the same way but
// sums afterwards with an ordinary kernel that may take every SM.
//
// Stream program (s: the caller's stream; side j pulls from the j-th peer):
//
//	s: signal ready (every peer's input is ready), fork
//	s: reduction kernel (waits for arrived[j] >= c+1, sums; consumed = c+1
//	   once every CTA is done with sub-chunk c)
//	side j, each sub-chunk c: [c >= 2: wait consumed >= c-1]
//	         copy peer's sub-chunk c -> staging slot c%2; arrived[j] = c+1
//	s: join, reset the words to 0, [all-reduce: push chunk me to every peer]
//	s: signal done (the peers' inputs may change again)
//
// The all-reduce (lc) is that reduce-scatter into chunk me of the output,
// then chunk me pushed into every peer's output by copy engines: two-shot on
// copy engines. No signal round sits between the halves: a rank pushes into
// the peers' chunk me, which only this rank reads, and only after its own
// reads are done.
//
// Any count on element-aligned buffers: an all-reduce splits as two-shot
// (allReduceSplit; a rank with an empty chunk copies and sums nothing but
// keeps every signal round), sub-chunks are multiples of 16 bytes (the last
// one shorter), and the kernel sums in vector mode, or element by element
// where this rank's chunk or output is not 16-byte aligned (reduceUnit).

const (
	// lcStagingBytes bounds a group's staging (two slots of n-1 sub-chunks).
	lcStagingBytes = 32 << 20
	// lcMinChunk is the smallest sub-chunk of a long call: below it the
	// per-copy cost dominates.
	lcMinChunk = 64 << 10
	// lcSubChunks is how many sub-chunks a call is cut into at least (when
	// they stay above lcMinChunk), so that sums overlap the copies.
	lcSubChunks = 8
)

// lcMaxChunk is the largest sub-chunk for n ranks (a multiple of 64 KiB).
func lcMaxChunk(n int) int64 {
	if n < 2 {
		return lcStagingBytes / 2
	}
	return max(lcMinChunk, lcStagingBytes/int64(2*(n-1))/lcMinChunk*lcMinChunk)
}

// lcSubChunk is the sub-chunk size for a chunk of bytes on n ranks, a
// multiple of 16 (staging slots and sub-chunk starts stay 16-byte aligned):
// at least lcSubChunks of them, each at least lcMinChunk (or the whole
// chunk rounded up to 16), at most lcMaxChunk(n). The last sub-chunk may be
// shorter (the kernel sums min(sub, rest) bytes).
func lcSubChunk(bytes int64, n int) int64 {
	up := func(x int64) int64 { return (x + kernAlign - 1) / kernAlign * kernAlign }
	return max(kernAlign, min(max(up(bytes/lcSubChunks), lcMinChunk), lcMaxChunk(n), up(bytes)))
}

// lcKernel is its reduction.
var lcKernel = declareKernel("reducescatter.ptx", "symmem_reducescatter_lc")

// lcPath is the low-contention path (algorithm lc): its reduction
// kernel's parameter block (nil without kernels) and the group's staging,
// allocated at its first call.
type lcPath struct {
	whole
	g       *core
	row     *pathInfo
	k       *kernelPath // whether the group has the kernels
	args    *cudadrv.Args
	staging *segment
}

// check says whether the low-contention path can run req.
func (l *lcPath) check(req *backend.Request) refusal {
	switch {
	case !l.row.does(req.Kind):
		return refKind
	case !l.k.loaded():
		return refNoKernels
	case !reducible(*req):
		return refOp
	case !req.InSym.OK:
		return refInNotSym
	case req.Kind == coll.AllReduce && !req.OutSym.OK:
		return refOutNotSym
	case !elemAligned(*req):
		return refElemAlign
	}
	return served
}

// whyNot says why the low-contention path cannot run req (nil if it can).
func (l *lcPath) whyNot(req backend.Request) error {
	switch r := l.check(&req); r {
	case served:
		return nil
	case refKind:
		return l.row.kindWhy(req.Kind)
	case refInNotSym:
		return fmt.Errorf("lc pulls the peers' inputs, so the input must be a pool block registered with group %q: %w", l.g.GroupName, errNotSymmetric)
	case refOutNotSym:
		return fmt.Errorf("lc all_reduce pushes its chunk into the peers' outputs, so the output must be a pool block registered with group %q: %w", l.g.GroupName, errNotSymmetric)
	default:
		return kernelsWhyNot(l.g.caps.kernWhy, req, r)
	}
}

func (l *lcPath) release() error {
	freeArgs(l.args)
	if l.staging != nil {
		return l.staging.release(l.g.b.ctx)
	}
	return nil
}

func (l *lcPath) refuse(c call) error { return refused(c, l.whyNot(c.req)) }

// prepare allocates the group's staging at its first lc call, before the
// call is published (an allocation that fails on this rank alone refuses
// the call). During stream capture it cannot: the call is refused with
// what to do.
func (l *lcPath) prepare(c call) error {
	g, s := l.g, c.req.Stream
	if l.staging != nil {
		return nil
	}
	if capturing, err := g.x.capturing(g.b.ctx, s); err != nil {
		return err
	} else if capturing {
		return fmt.Errorf("lc needs %d MiB of staging, allocated at the group's first lc call, and the stream is being captured: run one lc call before capturing: %w",
			lcStagingBytes>>20, errs.Refused)
	}
	seg, err := createLocal(g.b.ctx, lcStagingBytes, g.b.gran)
	if err != nil {
		return fmt.Errorf("lc staging (%d MiB): %w", lcStagingBytes>>20, err)
	}
	l.staging = seg
	return nil
}

// issue issues c (reduce-scatter or all-reduce). The caller holds runMu
// and has checked whyNot and prepared c.
func (l *lcPath) issue(c call) error {
	p := l.g.newProgram()
	if err := l.build(p, &c); err != nil {
		return err
	}
	return l.g.issue(p, &c, "low-contention")
}

// build adds c to p (pure: no driver call). The staging must exist.
func (l *lcPath) build(p *cudadrv.Program, c *call) error {
	g, req, s := l.g, c.req, c.req.Stream
	n, me := len(g.Ranks), g.Me
	if n-1 > len(g.st.h.side) {
		return fmt.Errorf("lc needs %d side streams, the group has %d", n-1, len(g.st.h.side))
	}
	common, off, chunk := chunkOf(req, n, me) // chunk: this rank's bytes (all-reduce: maybe fewer, or none)
	out := req.Out.Ptr
	if req.Kind == coll.AllReduce {
		out += uint64(off)
	}
	own := req.In.Ptr + uint64(off)
	// Staging is 16-byte aligned, and so is every sub-chunk's start in
	// the chunk (sub is a multiple of 16): own input and output decide.
	unit, ok := reduceUnit(own|out, req.DType.Size())
	if !ok {
		return fmt.Errorf("lc: input chunk %#x, output %#x: %w", own, out, errKernelAlign)
	}
	sub := lcSubChunk(common, n)
	subs := int((chunk + sub - 1) / sub)
	ctas := min(g.b.lcCTAs, kernMaxCTAs, max(1, int((sub+kernThreads*kernAlign-1)/(kernThreads*kernAlign))))
	words := g.peers.pads[me] + lcWords
	a := l.args
	a.PutU64(arOut, out)
	a.PutU64(arBytes, uint64(chunk))
	a.PutU64(argRegion, words)
	a.PutU32(argMe, uint32(me))
	a.PutU32(argN, uint32(n))
	a.PutU32(arDType, arDTypes[req.DType])
	a.PutU32(arFlags, reduceFlags(req, true))
	a.PutU64(lcOwn, own)
	a.PutU64(lcStaging, l.staging.base)
	a.PutU64(lcChunk, uint64(sub))
	a.PutU32(argUnit, unit)
	g.faults.put(a, req) // the outer call's digest, whatever this rank's chunk

	g.gate.guard(p, s, c.gate) // the gate's approval first (gate.go)
	g.hs.fork(p, s, req)
	g.peers.signal(p, s, slotReady, g.Me)
	if n > 1 {
		p.Record(s, g.st.h.forkX)
	}
	p.Launch(s, g.b.kern.fn(lcKernel), a, ctas, kernThreads)
	j := 0
	for r := 0; r < n; r++ {
		if r == me {
			continue
		}
		src, ok := g.peers.at(req.InSym.Seg, r, req.InSym.Off+off)
		if !ok {
			return fmt.Errorf("lc: input not registered with group %q: %w", g.GroupName, errNotSymmetric)
		}
		st := g.st.h.side[j]
		p.WaitEvent(st, g.st.h.forkX)
		arrived := words + uint64(4+4*j)
		for c := 0; c < subs; c++ {
			if c >= 2 {
				p.Wait32(st, words, uint32(c-1)) // sub-chunk c-2 summed: slot c%2 is free
			}
			at := int64(c) * sub
			slot := l.staging.base + uint64((int64(c%2)*int64(n-1)+int64(j))*sub)
			p.Copy(st, slot, src+uint64(at), min(sub, chunk-at))
			p.Write32(st, arrived, uint32(c+1))
		}
		p.Record(st, g.st.h.joins[j])
		p.WaitEvent(s, g.st.h.joins[j])
		j++
	}
	for w := 0; w < n; w++ { // consumed and arrived[0..n-2] (finished is back to 0), for the next call
		p.Write32(s, words+uint64(4*w), 0)
	}
	if req.Kind == coll.AllReduce && n > 1 && chunk > 0 {
		// Push chunk me (at off, chunk bytes) into every peer's output, in
		// rotated order (me+1, me+2, ...) as the copy-engine all-gather.
		if n > maxCERanks {
			return fmt.Errorf("lc all_reduce supports up to %d ranks, the group has %d", maxCERanks, n)
		}
		var xs [maxCERanks]xfer
		nx := 0
		for k := 1; k < n; k++ {
			r := (me + k) % n
			dst, ok := g.peers.at(req.OutSym.Seg, r, req.OutSym.Off+off)
			if !ok {
				return fmt.Errorf("lc all_reduce: output not registered with group %q: %w", g.GroupName, errNotSymmetric)
			}
			xs[nx] = xfer{dst, out, chunk}
			nx++
		}
		g.st.transfers(p, s, xs[:nx])
	}
	g.hs.join(p, s, req)
	g.peers.signal(p, s, slotDone, g.Me)
	return nil
}
