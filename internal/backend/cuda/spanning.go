package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
)

// A group whose ranks sit on several hosts: this host's members' agreement
// and the group's stop when a member on another host is gone or the
// ranks' calls differ (docs/multihost.md).

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
	e := fmt.Errorf("cuda: group %q: %w", g.GroupName, err)
	if !g.gone.CompareAndSwap(nil, &e) {
		return
	}
	g.paths.hier.stop(err) // children in the making: their wait for peers ends
	if k := g.paths.hier.kids.Load(); k != nil {
		k.abort(err)
	}
	// Synchronize returns e now, not when NCCL's teardown lets the stream go.
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

// goneErr is abortGroup's error, nil until the group was aborted.
func (g *Group) goneErr() error {
	if e := g.gone.Load(); e != nil {
		return *e
	}
	return nil
}

// joinHostPeers sets up hostPeers (group setup, when the group spans
// hosts): the members on this rank's host (local, group indices), when
// there are two or more and the job passes file descriptors. Collective
// over those members.
func (g *Group) joinHostPeers(ctx context.Context, local []int) error {
	if len(local) < 2 || g.FDs == nil {
		return nil
	}
	ranks := make([]int, len(local))
	for i, q := range local {
		ranks[i] = g.Ranks[q]
	}
	a, err := members.NewHostAgreement(ctx, fmt.Sprintf("cuda: group %q, this host's members", g.GroupName), g.FDs, g.Prefix+"/host", ranks, slices.Index(local, g.Me), g.Timeout)
	if err != nil {
		return err
	}
	g.hostPeers, g.hostMembers = a, local
	return nil
}
