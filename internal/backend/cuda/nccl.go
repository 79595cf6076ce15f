package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/pool"
)

// ncclGroup is a group's NCCL communicator (nil comm: unavailable, err says
// why) and whether its windows work.
type ncclGroup struct {
	comm *bnccl.Comm
	// plain is a second communicator with no windows: NCCL picks its
	// symmetric kernels for any buffer in a window, and for large
	// reductions those are slower than its regular ones, so the plain path
	// on pool buffers runs here. nil if it failed on any rank (ncclGroup.agree).
	plain   *bnccl.Comm
	err     error
	windows bool   // segments are registered as NCCL windows
	winWhy  string // why not
}

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

// agree makes the group's communicators alike on every rank. Each
// rank's creation can fail alone (a local resource after NCCL's collective
// init), and ranks that differ would not meet: one with the window-free
// communicator runs a plain call there, one without on the windowed one.
// setup's all-gather comes before the communicators exist, so the ranks
// exchange what they made (every rank: one that made none, NCCL missing or
// the GPU shared, says so), and a communicator some rank lacks is aborted
// on every rank that has it (locally: no peer waits for it).
func (n *ncclGroup) agree(ctx context.Context, g *members.Head) error {
	if len(g.Ranks) == 1 {
		return nil
	}
	why := ""
	if n.comm == nil {
		why = n.unavailable().Error()
	}
	all, err := g.AllGather(ctx, []byte(fmt.Sprintf("%t|%t|%s", n.comm != nil, n.plain != nil, why)))
	if err != nil {
		return fmt.Errorf("agreeing on the NCCL communicators: %w", err)
	}
	comm, plain, theirs := ncclAgreed(g.Ranks, g.Me, all)
	var errs []error
	if !plain && n.plain != nil {
		errs = append(errs, n.plain.Abort())
		n.plain = nil
	}
	if !comm && n.comm != nil {
		errs = append(errs, n.comm.Abort())
		*n = ncclGroup{err: theirs, winWhy: "no communicator"}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dropping the NCCL communicators some rank lacks: %w", err)
	}
	return nil
}

// ncclAgreed reads every rank's report of its communicators (agree):
// whether each has the windowed one and the window-free one, and why the
// first other rank without a communicator has none. A report it cannot
// read counts as none.
func ncclAgreed(ranks []int, me int, all [][]byte) (comm, plain bool, why error) {
	comm, plain = true, true
	for q, v := range all {
		c, rest, _ := strings.Cut(string(v), "|")
		p, reason, ok := strings.Cut(rest, "|")
		hasComm, hasPlain := ok && c == "true", ok && p == "true"
		if !hasComm && comm && q != me {
			if !ok {
				reason = fmt.Sprintf("unreadable report %q", v)
			}
			why = fmt.Errorf("rank %d has no NCCL communicator (%s), so no rank uses one", ranks[q], reason)
		}
		comm = comm && hasComm
		plain = plain && hasComm && hasPlain
	}
	return comm, plain, why
}

// unavailable says why the group has no communicator. It wraps the cause,
// which may hold a sentinel (errs.PeerExited, rendezvous.ErrTimeout).
func (n *ncclGroup) unavailable() error {
	if n.err == nil {
		return errors.New("no communicator")
	}
	return n.err
}

func (n *ncclGroup) register(ctx context.Context, seg pool.Segment) error {
	if n.comm == nil || !n.windows {
		return nil
	}
	if err := n.comm.Register(ctx, seg.Base, seg.Size); err != nil {
		if errors.Is(err, errs.NotSupported) {
			n.windows, n.winWhy = false, err.Error()
			return nil
		}
		return fmt.Errorf("NCCL window: %w", err)
	}
	return nil
}

func (n *ncclGroup) deregister(ctx context.Context, seg pool.Segment) error {
	if n.comm == nil || !n.windows || !n.comm.Windowed(seg.Base, seg.Size) {
		return nil
	}
	return n.comm.Deregister(ctx, seg.Base)
}

func (n *ncclGroup) close(ctx context.Context) error {
	if n.comm == nil {
		return nil
	}
	var perr error
	if n.plain != nil {
		perr = n.plain.Close(ctx)
		n.plain = nil
	}
	err := n.comm.Close(ctx)
	n.comm = nil
	return errors.Join(perr, err)
}

// windowed reports whether both buffers of req lie in NCCL windows.
func (n *ncclGroup) windowed(req backend.Request) bool {
	if n.comm == nil || !n.windows {
		return false
	}
	return n.comm.Windowed(req.In.Ptr, req.In.Len) && n.comm.Windowed(req.Out.Ptr, req.Out.Len)
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

// unsafe reports whether NCCL would run c on symmetric kernels known to
// get its shape wrong (judgeWindow) with no window-free communicator to
// avoid them.
func (n *ncclGroup) unsafe(c *call) bool {
	return c.verdict == windowWrong && n.plain == nil
}

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
		return "NCCL takes all-to-all split counts from the host only (split counts on the device have no GPU path yet)"
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
