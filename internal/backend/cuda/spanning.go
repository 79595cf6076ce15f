package cuda

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
)

// A group whose ranks sit on several hosts: the group's stop when a member
// on another host is gone or the ranks' calls differ (docs/multihost.md;
// this host's members' agreement: agreements.host, agreement.go).

// abortGroup stops a group that spans hosts, once: when a member on
// another host exited (members.Presences.OnGone), or when this host's
// members differ or one is gone (hostGate). Later calls and Synchronize
// fail with err, and the group's NCCL communicators are stopped
// (bnccl.Comm.Stop: revoked, or aborted before NCCL 2.28), which ends NCCL
// kernels waiting for the gone rank instead of leaving the stream blocked
// until the process is killed; so are the hier path's child groups.
// Synchronize returns err at once while the group is open (after an abort
// the stream drains only when NCCL's teardown completes). Nothing else
// waits across hosts: symmem's kernels and copy engines do not run on such
// groups.
func (g *Group) abortGroup(err error, comms []*bnccl.Comm) {
	if !g.watch.stop(fmt.Errorf("cuda: group %q: %w", g.GroupName, err)) {
		return
	}
	g.paths.hier.stop(err) // children in the making: their wait for peers ends
	if k := g.paths.hier.kids.Load(); k != nil {
		k.abort(err)
	}
	// Synchronize returns the abort's error now, not when NCCL's teardown lets the stream go.
	g.b.fireAborted()
	differ := errors.Is(err, errs.Mismatch) // NCCL may have run calls that differ: its state is undefined
	for _, c := range comms {
		switch { // each waits for a call in progress on the communicator; nothing after Close
		case c == nil:
		case differ:
			c.Abandon()
		default:
			c.Stop()
		}
	}
}

// hostWatch is how a group that spans hosts learns that it must stop:
// abortGroup's error, the presence watch and the call log. The zero value
// watches nothing (a group on one host).
type hostWatch struct {
	// gone is abortGroup's error (a member gone, or a difference on this
	// host or between hosts); unwatch ends the presence watch (nil without
	// one); calls compares the calls across hosts after they were issued
	// (nil unless the group spans hosts).
	gone    atomic.Pointer[error]
	unwatch func()
	calls   *members.CallLog
}

// stop records e as the abort's error; false if one was recorded already.
func (w *hostWatch) stop(e error) bool { return w.gone.CompareAndSwap(nil, &e) }

// err is abortGroup's error, nil until the group was aborted.
func (w *hostWatch) err() error {
	if e := w.gone.Load(); e != nil {
		return *e
	}
	return nil
}

// close ends the presence watch and the call log (Group.Close).
func (w *hostWatch) close() {
	if w.unwatch != nil {
		w.unwatch()
	}
	if w.calls != nil {
		w.calls.Close()
	}
}
