package cuda

import (
	"context"
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// errNotSymmetric is wrapped when a forced symmetric path gets buffers that
// are not pool blocks registered with the group.
var errNotSymmetric = errors.New("buffer is not symmetric (not a registered pool block)")

// ErrNotSymmetric is errNotSymmetric, for callers' errors.Is.
var ErrNotSymmetric = errNotSymmetric

// Run executes req on req.Stream (the backend's stream when 0) and reports
// the path. It returns once the work is enqueued.
//
// Copy-engine and kernel collectives of one group must be ordered on the GPU
// the same way on every rank (issue them on one stream, or order the streams
// with events). They may be captured into a CUDA graph (the stream being
// captured is the request's stream): their signals carry no host-chosen
// values, so every replay is a new, correct collective — provided every rank
// replays its graph the same number of times.
func (g *Group) Run(ctx context.Context, req backend.Request) (coll.Path, error) {
	if req.Stream == 0 {
		req.Stream = g.b.stream.Handle()
	}
	// The NCCL window decision is made once, here; the choice and NCCL
	// both consume it.
	c := newCall(req, g.nccl.windowed(req), g.b.nccl.version())
	algo, why, err := g.choose(&c)
	if err != nil {
		return coll.Path{Algo: algo, Reason: why}, fmt.Errorf("cuda: group %q: %v: %w", g.name, req.Kind, err)
	}
	path := coll.Path{Algo: algo, Reason: why}
	c.req.Algo = algo // in the fingerprint (fault.go) and the gate's entry (gate.go)
	p := g.pathFor(algo)
	g.runMu.Lock()
	// A broken group (a gate difference, a failed copy-engine call)
	// refuses every call.
	if g.broken != nil {
		err = fmt.Errorf("%w: %w", ErrBroken, g.broken)
	} else if err = g.publish(&c); err == nil {
		if err = p.issue(&c); err == nil {
			err = g.queued(c.gate)
		}
	}
	g.runMu.Unlock()
	if err == nil {
		err = p.finish(ctx, &c)
	}
	if c.ran != "" {
		path.Algo = c.ran
	}
	if err != nil {
		return path, fmt.Errorf("cuda: group %q: %v via %s: %w", g.name, req.Kind, path.Algo, err)
	}
	// A mismatch an earlier kernel found (fault.go) is reported now, after
	// this call was issued like on every other rank: refusing it here
	// could leave a peer whose host has not seen the report yet waiting.
	if err := g.Fault(); err != nil {
		return path, err
	}
	return path, nil
}

// requestedWhy is the reason of a forced path (constant: no formatting per
// call).
var requestedWhy = map[coll.Algo]string{
	coll.AlgoKernel: "kernel requested", coll.AlgoTwoShot: "two-shot requested",
	coll.AlgoLowContention: "lc requested", coll.AlgoCE: "ce requested",
	coll.AlgoNCCL: "nccl requested", coll.AlgoNCCLWindow: "nccl-window requested",
}

// autoKernelWhy is auto's reason for a kernel path (constant: no formatting
// per call).
var autoKernelWhy = map[coll.Kind]string{
	coll.AllGather:     "auto: symmem's all_gather kernel for small messages (autotable.go)",
	coll.ReduceScatter: "auto: symmem's reduce_scatter kernel for small messages (autotable.go)",
	coll.AllReduce:     "auto: symmem's all_reduce kernel for small messages (autotable.go)",
}

// choose resolves c's algorithm (c.req.Algo) to the path that runs, with
// the reason: a forced path unless it refuses the call (path.refuse), or
// auto's choice.
func (g *Group) choose(c *call) (coll.Algo, string, error) {
	req := c.req
	if p := g.pathFor(req.Algo); p != nil {
		if err := p.refuse(c); err != nil {
			return req.Algo, "", err
		}
		return req.Algo, requestedWhy[req.Algo], nil
	}
	switch req.Algo {
	case coll.AlgoAuto, coll.AlgoDirect, "":
		return g.auto(c)
	}
	return req.Algo, "", fmt.Errorf("algorithm %q is not a GPU path (want auto, kernel, two-shot, lc, ce, nccl or nccl-window): %w", req.Algo, ErrNotSupported)
}

// auto is auto's choice for c.
func (g *Group) auto(c *call) (coll.Algo, string, error) {
	req, win, verdict := c.req, c.win, c.verdict
	n := len(g.ranks)
	symOK := symmetric(req)
	inPlace := req.Kind == coll.AllGather && req.InPlace
	ceOK := g.paths.ce.serves(req)
	bad := verdict == windowWrong && g.nccl.plain == nil
	winAuto := win && verdict == windowGood
	total := req.In.Len // the full tensor: all-gather's output
	if req.Kind == coll.AllGather {
		total = req.Out.Len
	}
	pick := autoPick(req.Kind, total, n, inPlace)
	// Only kernel rows pay for the kernel check (it formats an error when
	// the kernel cannot run), and at most once.
	kernChecked, kernServes := false, false
	kernel := func() bool {
		if !kernChecked {
			kernChecked, kernServes = true, g.paths.kernel.whyNot(req) == nil
		}
		return kernServes
	}
	if pick == coll.AlgoKernel && g.nccl.comm != nil && !bad && reduceElementwise(req) {
		return coll.AlgoNCCL, "auto: plain NCCL, symmem's reduction kernel would go element by element here (a buffer or the per-rank size off 16 bytes; autotable.go)", nil
	}
	kernOK := (pick == coll.AlgoKernel || (pick == coll.AlgoNCCLWindow && !winAuto && req.Kind == coll.AllGather)) && kernel()
	if pick == coll.AlgoKernel {
		if kernOK {
			return coll.AlgoKernel, autoKernelWhy[req.Kind], nil
		}
		pick = coll.AlgoNCCLWindow // the next best there (autotable.go)
	}
	if pick == coll.AlgoCE && ceOK {
		return coll.AlgoCE, "auto: copy engines for all_gather on symmetric buffers (autotable.go)", nil
	}
	if pick == coll.AlgoNCCLWindow && !winAuto && req.Kind == coll.AllGather {
		if kernOK {
			return coll.AlgoKernel, "auto: symmem's all-gather kernel (buffers not in NCCL windows)", nil
		}
		if ceOK {
			return coll.AlgoCE, "auto: copy engines (buffers not in NCCL windows)", nil
		}
	}
	if g.nccl.comm == nil || bad {
		// Without NCCL (none loaded, or ranks sharing a GPU) a reduction
		// that the auto table gives to NCCL still runs on symmem's
		// kernels: one-shot up to oneShotMax, then two-shot, which reads
		// each peer byte once where one-shot reads n-1 whole inputs; lc
		// where the kernels cannot (e.g. an ordinary reduce-scatter output).
		if req.Kind != coll.AllGather && g.nccl.comm == nil {
			oneShot := req.Kind == coll.ReduceScatter || req.Count*int64(req.DType.Size()) <= oneShotMax(req, n)
			switch {
			case oneShot && kernel():
				return coll.AlgoKernel, "auto: NCCL unavailable, symmem's reduction kernel", nil
			case req.Kind == coll.AllReduce && g.paths.twoShot.whyNot(req) == nil:
				return coll.AlgoTwoShot, "auto: NCCL unavailable, symmem's two-shot all-reduce", nil
			case kernel():
				return coll.AlgoKernel, "auto: NCCL unavailable, symmem's reduction kernel", nil
			case g.paths.lc.whyNot(req) == nil:
				return coll.AlgoLowContention, "auto: NCCL unavailable, symmem's low-contention path", nil
			}
		}
		if ceOK {
			return coll.AlgoCE, "auto: NCCL unavailable or unsafe here, copy engines", nil
		}
		if bad {
			return coll.AlgoAuto, "", ErrNCCLWindowWrong
		}
		return coll.AlgoAuto, "", fmt.Errorf("no GPU path: NCCL unavailable (%v) and %s: %w", g.nccl.err, g.paths.ce.why(req), ErrNotSupported)
	}
	if (pick == coll.AlgoNCCLWindow || pick == coll.AlgoCE) && winAuto {
		return coll.AlgoNCCLWindow, "auto: NCCL on windows (autotable.go)", nil
	}
	if win && verdict != windowGood {
		return coll.AlgoNCCL, "auto: plain NCCL, NCCL's symmetric kernels are slow or wrong for this shape (ncclwindow.go)", nil
	}
	if !symOK {
		return coll.AlgoNCCL, "auto: plain NCCL, buffers are not symmetric pool blocks", nil
	}
	return coll.AlgoNCCL, "auto: plain NCCL (autotable.go)", nil
}

// Explain reports the path Run would take for req, without running it (for
// `symmem doctor`): symmetric spans count as pool blocks registered with the
// group (and so NCCL windows when NCCL has them). A request Run would refuse
// explains why.
func (g *Group) Explain(req backend.Request) coll.Path {
	c := newCall(req, symmetric(req) && g.nccl.comm != nil && g.nccl.windows, g.b.nccl.version())
	algo, why, err := g.choose(&c)
	if err != nil {
		why = "refused: " + err.Error()
	}
	return coll.Path{Algo: algo, Reason: why}
}

// oneShotMax is the largest all-reduce (bytes per rank) auto gives to the
// one-shot kernel without NCCL: on 2 ranks out of place, up to where
// two-shot catches up (measured with 2 ranks sharing one H100:
// results/gpu-reduce-2026-11-23.md). In place the one-shot
// kernel holds at most arMaxBytes; wider groups are not measured and read
// (n-1) inputs, so they switch at arMaxBytes too.
func oneShotMax(req backend.Request, n int) int64 {
	if n <= 2 && !req.InPlace {
		return 64 << 20
	}
	return arMaxBytes
}
