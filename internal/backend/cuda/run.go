package cuda

import (
	"context"
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
)

// Run executes req on req.Stream (the backend's stream when 0) and reports
// the path. It returns once the work is enqueued.
//
// A group's calls run on the GPU in the order Run was called, also across
// streams (streams.follow), so ranks that make the same calls in the same
// order meet in step. They may be captured into a CUDA graph (the stream being
// captured is the request's stream): their signals carry no host-chosen
// values, so every replay is a new, correct collective — provided every rank
// replays its graph the same number of times.
//
// An all-to-all with host split counts exchanges them first (splitMatrix),
// through the store: every rank checks the whole matrix before anything
// is queued.
func (g *Group) Run(ctx context.Context, req backend.Request) (coll.Path, error) {
	if err := g.watch.err(); err != nil {
		return coll.Path{}, fmt.Errorf("%w: %w", errs.Broken, err)
	}
	// The context bounds the call until it is published at the gate, not
	// after: its peers may then be approved and wait for this rank on the
	// GPU, so a published call is made whatever the context says.
	if err := ctx.Err(); err != nil {
		return coll.Path{}, fmt.Errorf("cuda: group %q: %v: %w", g.GroupName, req.Kind, err)
	}
	if req.Stream == 0 {
		req.Stream = g.b.stream.Handle()
	}
	// The NCCL window decision is made once, here; the choice and NCCL
	// both consume it.
	c := newCall(req, g.nccl.windowed(req), g.b.nccl.version())
	if req.Kind == coll.AllToAll && req.A2A.Kind() == backend.SplitsHost {
		var err error
		if c.counts, err = splitMatrix(ctx, &g.Head, req); err != nil {
			return coll.Path{}, fmt.Errorf("cuda: group %q: %v: %w", g.GroupName, req.Kind, err)
		}
	}
	p, algo, why, err := g.paths.choose(&c)
	if err != nil {
		return coll.Path{Algo: algo, Reason: why}, fmt.Errorf("cuda: group %q: %v: %w", g.GroupName, req.Kind, err)
	}
	path := coll.Path{Algo: algo, Reason: why}
	c.req.Algo = algo // in the digest (fault.go) and the gate's entry (gate.go)
	g.runMu.Lock()
	err = g.start(p, &c)
	g.runMu.Unlock()
	if err == nil {
		var ran coll.Algo
		if ran, err = p.finish(ctx, c); ran != "" {
			path.Algo = ran
		}
		if err != nil {
			err = g.finishFailed(err)
		}
	}
	if err != nil {
		return path, fmt.Errorf("cuda: group %q: %v via %s: %w", g.GroupName, req.Kind, path.Algo, err)
	}
	// A mismatch an earlier kernel found (fault.go) is reported now, after
	// this call was issued like on every other rank: refusing it here
	// could leave a peer whose host has not seen the report yet waiting.
	if err := g.Fault(); err != nil {
		return path, err
	}
	return path, nil
}

// start prepares, publishes and issues c on path p; the caller holds
// runMu. What can fail on this rank alone is done before c is published
// at the gate (prepare): a failure there refuses the call, and no peer is
// approved to wait for this rank. A failure after it breaks the group:
// the peers may be approved already and wait for this rank on the GPU.
func (g *core) start(p path, c *call) error {
	// A broken group (a gate difference, a failed copy-engine call)
	// refuses every call.
	if g.broken != nil {
		return fmt.Errorf("%w: %w", errs.Broken, g.broken)
	}
	if err := g.prepare(p, *c); err != nil {
		return err
	}
	if err := g.gate.publish(c, gated(c.req.Algo)); err != nil {
		return err
	}
	if err := p.issue(*c); err != nil {
		return g.breakAfter(err)
	}
	if c.req.Algo != coll.AlgoHier { // prepare ordered it (follow); a refused call's follow is not committed
		g.st.followed()
	}
	if err := g.gate.enqueued(c.gate); err != nil {
		return err // a difference found meanwhile: the gate broke the group (fail)
	}
	if g.watch.calls != nil { // a group across hosts: compared after the fact
		g.watch.calls.Add(c.req.Record, agree.PathCode(c.req.Algo))
	}
	return nil
}

// prepare does the host work of c that can fail on this rank alone
// (driver objects, allocations), before Run publishes c at the gate: the
// fence event of a caller's stream (track; hier queues through its child
// groups, which fence it) and what path p needs (path.prepare). The
// caller holds runMu.
func (g *core) prepare(p path, c call) error {
	if c.req.Algo != coll.AlgoHier { // hier's child groups order and fence their own calls
		if err := g.st.fenceFor(c.req.Stream, g.b.stream, g.b.ctx); err != nil {
			return err
		}
		if err := g.follow(c.req.Stream); err != nil {
			return err
		}
	}
	return p.prepare(c)
}

// breakAfter breaks the group by err, the failure of a call after Run
// published it at the gate, and returns the call's error: the peers go on
// with the call, and this rank cannot run another in step with them. The
// caller holds runMu.
func (g *core) breakAfter(err error) error {
	g.breakWith(err)
	if errors.Is(err, errs.Broken) { // core.issue broke it and says so
		return err
	}
	return fmt.Errorf("%w: %w", errs.Broken, err)
}

// finishFailed is the error of a call whose finish failed (after Run
// published and issued it): breakAfter's, or, where the group was aborted
// meanwhile (a member on another host exited, the ranks' calls differ:
// abortGroup), the abort's, which explains the failure (its stopped NCCL
// communicator) and already refuses every later call.
func (g *core) finishFailed(err error) error {
	if gone := g.watch.err(); gone != nil {
		return fmt.Errorf("%w: %w (%v)", errs.Broken, gone, err)
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	return g.breakAfter(err)
}

// choose resolves c's algorithm (c.req.Algo) to the path that runs, with
// its name and the reason: a forced path unless it refuses the call
// (path.refuse), or auto's choice (autotable.go).
func (ps *pathSet) choose(c *call) (path, coll.Algo, string, error) {
	req := c.req
	if i := pathIndex(req.Algo); i >= 0 {
		p := ps.all[i]
		if err := p.refuse(*c); err != nil {
			return nil, req.Algo, "", err
		}
		r := &pathTable[i]
		if !r.does(req.Kind) { // where the path's own checks do not look at the op
			return nil, req.Algo, "", refused(*c, r.kindWhy(req.Kind))
		}
		return p, req.Algo, r.requested, nil
	}
	switch req.Algo {
	case coll.AlgoAuto, coll.AlgoDirect, "":
		return ps.auto(c)
	}
	return nil, req.Algo, "", fmt.Errorf("algorithm %q is not a GPU path (want %s): %w", req.Algo, gpuPathList, errs.NotSupported)
}

// Explain reports the path Run would take for req, without running it (for
// `symmem doctor`): symmetric spans count as pool blocks registered with the
// group (and so NCCL windows when NCCL has them). A request Run would refuse
// explains why.
func (g *Group) Explain(req backend.Request) coll.Path {
	c := newCall(req, buffersSymmetric(req) && g.nccl.comm != nil && g.nccl.windows, g.b.nccl.version())
	_, algo, why, err := g.paths.choose(&c)
	if err != nil {
		why = "refused: " + err.Error()
	}
	return coll.Path{Algo: algo, Reason: why}
}
