package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
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

// unsafe reports whether NCCL would run c on symmetric kernels known to
// get its shape wrong (judgeWindow) with no window-free communicator to
// avoid them.
func (n *ncclGroup) unsafe(c *call) bool {
	return c.verdict == windowWrong && n.plain == nil
}
