package cuda

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// newNCCLGroup creates the group's communicators (ncclGroup, ncclgroup.go)
// from its core: the backend's library and context, and the members.
func newNCCLGroup(ctx context.Context, g *core, gen int) ncclGroup {
	st := &g.b.nccl
	if st.lib == nil {
		return ncclGroup{err: st.err, winWhy: "no NCCL"}
	}
	// A blocking communicator (internal/backend/nccl's default): window
	// registration on a non-blocking one fails on NCCL 2.28.9. Every rank has met in setup's all-gather
	// before the communicator is created, so a blocking init does not wait
	// for absent ranks.
	cfg := bnccl.Config{}
	st.creating()
	c, err := bnccl.New(ctx, bnccl.Options{GroupName: g.GroupName, Generation: uint64(gen), Rank: g.Me, Size: len(g.Ranks),
		Context: g.b.ctx.Handle(), Store: g.Store, Timeout: g.Timeout, Lib: st.lib, Config: cfg})
	if err != nil {
		return ncclGroup{err: err, winWhy: "no communicator"}
	}
	ng := ncclGroup{comm: c, windows: st.lib.HasWindows}
	if !ng.windows {
		ng.winWhy = fmt.Sprintf("NCCL %s has no window registration", st.lib.VersionString())
		return ng
	}
	// Every rank reaches this point (the first communicator's init is
	// collective), so the second one is created in step everywhere.
	if p, err := bnccl.New(ctx, bnccl.Options{GroupName: g.GroupName + "#plain", Generation: uint64(gen), Rank: g.Me, Size: len(g.Ranks),
		Context: g.b.ctx.Handle(), Store: g.Store, Timeout: g.Timeout, Lib: st.lib, Config: cfg}); err == nil {
		ng.plain = p
	}
	return ng
}

// ncclRun is what both NCCL paths do around NCCL's call.
type ncclRun struct{ g *core }

func (ncclRun) prepare(call) error { return nil }

// issue queues what goes before NCCL's call on c's stream: the gate's
// guard when the call is not yet approved (gate.go) and, in checked mode,
// the handshake's fork (handshake.go); nothing when neither is needed.
func (r ncclRun) issue(c call) error {
	g := r.g
	if c.gate.wait == 0 && !g.hs.on(c.req) {
		return nil
	}
	p := g.newProgram()
	g.gate.guard(p, c.req.Stream, c.gate)
	g.hs.fork(p, c.req.Stream, c.req)
	return g.issue(p, &c, "gate and handshake")
}

// run makes NCCL's call on comm (win: its buffers in windows, as NCCL is
// told) and, in checked mode, joins the handshake after it, also when the
// call failed (the fork is queued). It returns the path as NCCL reports
// it. The call was published at the gate, so the peers may be approved
// and wait for this rank in theirs: it is made even if ctx ended meanwhile
// (bnccl.Comm.RunDecided refuses a done context), bounded by the
// communicator's timeout. A context that cannot end (Background) needs no
// wrapper, which would allocate.
func (r ncclRun) run(ctx context.Context, c call, comm *bnccl.Comm, win bool) (coll.Algo, error) {
	g := r.g
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	p, err := g.x.nccl(ctx, comm, c.req, win)
	if g.hs.on(c.req) {
		g.runMu.Lock()
		jerr := g.hs.after(&c)
		g.runMu.Unlock()
		if err == nil {
			err = jerr
		}
	}
	return p.Algo, err
}

// ncclPath is plain NCCL (algorithm nccl): on the window-free communicator
// where the group has one, so NCCL runs its regular kernels even on pool
// buffers (ncclGroup.plain says why); else on the windowed one, where NCCL
// runs its symmetric kernels on buffers in windows (and reports
// nccl-window).
type ncclPath struct{ ncclRun }

func (n *ncclPath) refuse(c call) error {
	g := n.g
	switch {
	case g.nccl.comm == nil:
		return fmt.Errorf("nccl requested but NCCL is unavailable (%w): %w", g.nccl.unavailable(), errs.NotSupported)
	case c.req.Kind == coll.AllToAll && ncclA2AWhy(g.b.nccl.lib, c.req) != "":
		return fmt.Errorf("nccl requested but %s: %w", ncclA2AWhy(g.b.nccl.lib, c.req), errs.NotSupported)
	case g.nccl.unsafe(&c):
		return fmt.Errorf("nccl requested on window buffers and the window-free communicator is missing: %w: %w", ErrNCCLWindowWrong, errs.Refused)
	}
	return nil
}

// ncclA2AWhy says why lib, the loaded NCCL (nil: none), cannot run the
// all-to-all req ("" if it can): equal blocks need ncclAlltoAll or the
// point-to-point calls, split counts the point-to-point calls, which take
// them from the host.
func ncclA2AWhy(lib *libnccl.Lib, req backend.Request) string {
	switch {
	case req.A2A.Kind() == backend.SplitsDevice:
		return "NCCL takes all-to-all split counts from the host only (symmem's all-to-all kernel reads split counts on the device)"
	case lib == nil:
		return "NCCL is not loaded"
	case lib.HasSendRecv, req.A2A.Kind() == backend.SplitsEqual && lib.HasAllToAll:
		return ""
	}
	return fmt.Sprintf("NCCL %s lacks ncclSend, ncclRecv or the group calls for all_to_all", lib.VersionString())
}

func (n *ncclPath) finish(ctx context.Context, c call) (coll.Algo, error) {
	if p := n.g.nccl.plain; p != nil {
		return n.run(ctx, c, p, false) // regular kernels even on pool buffers
	}
	return n.run(ctx, c, n.g.nccl.comm, c.win)
}

// ncclWindowPath is NCCL on windows (algorithm nccl-window): the windowed
// communicator on buffers in its windows, where NCCL runs its symmetric
// kernels; shapes they are known to get wrong are refused.
type ncclWindowPath struct{ ncclRun }

func (w *ncclWindowPath) refuse(c call) error {
	g, req := w.g, c.req
	switch {
	case g.nccl.comm == nil:
		return fmt.Errorf("nccl-window requested but NCCL is unavailable (%w): %w", g.nccl.unavailable(), errs.NotSupported)
	case !c.win && !buffersSymmetric(req):
		return fmt.Errorf("nccl-window requested but the buffers are not in NCCL windows (%s): %w: %w", w.offWhy(req), errNotSymmetric, errs.Refused)
	case !c.win: // registered pool blocks, but this group's NCCL keeps no windows
		return fmt.Errorf("nccl-window requested but the buffers are not in NCCL windows (%s): %w: %w", w.offWhy(req), errs.NotSupported, errs.Refused)
	case c.verdict == windowWrong:
		return fmt.Errorf("%v of %d %v per rank: %w: %w", req.Kind, req.Count, req.DType, ErrNCCLWindowWrong, errs.Refused)
	}
	return nil
}

// offWhy says why req's buffers are not in the group's windows.
func (w *ncclWindowPath) offWhy(req backend.Request) string {
	switch {
	case !buffersSymmetric(req):
		return "not pool blocks registered with this group"
	case w.g.nccl.winWhy != "":
		return w.g.nccl.winWhy
	}
	return "outside the registered windows"
}

func (w *ncclWindowPath) finish(ctx context.Context, c call) (coll.Algo, error) {
	return w.run(ctx, c, w.g.nccl.comm, c.win)
}
