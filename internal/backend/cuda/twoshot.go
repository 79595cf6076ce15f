package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// The two-shot all-reduce (algorithm two-shot) on symmem's SM kernels: the
// reduction kernel, pointed at chunk me of every rank's input, sums it into
// chunk me of the output (a reduce-scatter, results stored at once), then
// the all-gather kernel pushes that chunk into every peer's output, in
// place. Each rank reads and writes 2(n-1)/n of the data over NVLink where
// the one-shot kernel reads (n-1) whole inputs, so it is the kernel path
// for large messages. Two launches in one cgo call; each kernel has its own
// signal rounds. In place (in == out) is safe without more: a rank writes
// chunk me of its own output, which only it reads, and chunk me of the
// peers', which only it reads too, after its own reads.
//
// Any count: chunks are allReduceSplit's (ceil(count/n) rounded up to whole
// 16-byte vectors, so every chunk starts as aligned as the buffers), the
// last ones shorter or empty; a rank with an empty chunk still takes part
// in every signal round. Both grids come from the common chunk size.

// twoShotPath is the two-shot path. Its first launch uses the kernel
// path's parameter block, its second its own (nil without kernels).
type twoShotPath struct {
	whole
	g      *core
	row    *pathInfo
	k      *kernelPath // the first launch's
	second *cudadrv.Args
}

// check says whether the two-shot path can run req.
func (t *twoShotPath) check(req *backend.Request) refusal {
	switch {
	case !t.row.does(req.Kind):
		return refKind
	case !t.k.loaded():
		return refNoKernels
	case !req.InSym.OK || !req.OutSym.OK:
		return refInNotSym
	case !reducible(*req):
		return refOp
	case !elemAligned(*req):
		return refElemAlign
	}
	return served
}

// whyNot says why the two-shot path cannot run req (nil if it can).
func (t *twoShotPath) whyNot(req backend.Request) error {
	switch r := t.check(&req); r {
	case served:
		return nil
	case refKind:
		return t.row.kindWhy(req.Kind)
	case refInNotSym:
		return fmt.Errorf("two-shot reads the peers' inputs and writes their outputs, so both must be pool blocks registered with group %q: %w", t.g.GroupName, errNotSymmetric)
	default:
		return kernelsWhyNot(t.g.caps.kernWhy, req, r)
	}
}

func (t *twoShotPath) release() error { freeArgs(t.second); return nil }

func (t *twoShotPath) refuse(c call) error { return refused(c, t.whyNot(c.req)) }

// issue issues c. The caller holds runMu and has checked whyNot.
func (t *twoShotPath) issue(c call) error {
	g, s := t.g, c.req.Stream
	chunk, err := t.fill(c.req)
	if err != nil {
		return err
	}
	p := g.newProgram()
	p.Launch(s, g.b.kern.fn(arKernel), t.k.args, allReduceCTAs(chunk), kernThreads)
	p.Launch(s, g.b.kern.fn(agKernel), t.second, allGatherCTAs(chunk, kernMaxCTAs), kernThreads)
	return g.issue(p, &c, "two-shot")
}

// fill writes both launches' parameter blocks (pure: no driver call) and
// returns the common chunk in bytes (the grids' size).
func (t *twoShotPath) fill(req backend.Request) (int64, error) {
	g, k := t.g, t.k
	chunk, off, n := chunkOf(req, len(g.Ranks), g.Me)
	at := req.Out.Ptr + uint64(off)
	if err := k.fillAllReduceArgs(k.args, req, at, off, n, true); err != nil {
		return 0, err
	}
	// The digest is the outer call's (Record, Algo): the same on every
	// rank, whatever its chunk's length.
	ag := backend.Request{Kind: coll.AllGather, DType: req.DType, Count: n / int64(req.DType.Size()),
		In: coll.Span{Ptr: at, Len: n}, Out: req.Out, OutSym: req.OutSym, InPlace: true, Record: req.Record, Algo: req.Algo}
	if err := k.fillAllGatherAt(t.second, ag, off, n); err != nil {
		return 0, err
	}
	// Two launches: a mismatch found by the first makes the second end
	// uncounted (ptxgen/layout.go, flagFirst), so the epochs stay in step
	// with a peer that ran a one-launch path.
	k.args.PutU32(arFlags, reduceFlags(req, true)|kernFlagFirst)
	t.second.PutU32(arFlags, kernFlagSecond)
	return chunk, nil
}
