package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
)

// TestGateEndedWithoutGate: a kernel's abandoned-wait report on a group
// whose gate did not fail (or that has none) still breaks the group with
// an error, never nil.
func TestGateEndedWithoutGate(t *testing.T) {
	var gt *callGate
	if err := gt.ended(); !errors.Is(err, errs.Broken) {
		t.Errorf("ended without a gate: %v, want errs.Broken", err)
	}
	if w := gt.stopWord(); w != 0 {
		t.Errorf("stopWord without a gate: %#x, want 0 (the kernels do not poll)", w)
	}
}

// TestGatePaths: every algorithm has a gate code that names it back, and
// exactly the copy-engine and NCCL paths (hier's cross-host steps are
// NCCL's) wait for approval.
func TestGatePaths(t *testing.T) {
	for _, a := range coll.Algos() {
		c := agree.PathCode(a)
		if c == 0 || agree.PathOf(c) != a {
			t.Errorf("%s: code %d names %q", a, c, agree.PathOf(c))
		}
		want := a == coll.AlgoCE || a == coll.AlgoLowContention || a == coll.AlgoNCCL || a == coll.AlgoNCCLWindow || a == coll.AlgoHier
		if gated(a) != want {
			t.Errorf("%s: gated %v, want %v", a, gated(a), want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { agree.PathCode(coll.AlgoNCCLWindow) }); n != 0 {
		t.Errorf("pathCode allocates %v times per call (it runs on every collective)", n)
	}
}

// TestGateErrors: the gate's errors name what differs (the argument with
// both values, the paths, the collective, the rank that left) with global
// ranks, say whether this rank's context was stopped, and wrap the
// sentinels users test for.
func TestGateErrors(t *testing.T) {
	gt := &callGate{g: &core{Head: members.Head{GroupName: "tp", Ranks: []int{4, 5, 6}}}}
	ag := callRec(coll.AllGather, coll.BFloat16, 4096)
	half := callRec(coll.AllGather, coll.BFloat16, 2048)
	ar := callRec(coll.AllReduce, coll.BFloat16, 4096)
	ce, kern := agree.PathCode(coll.AlgoCE), agree.PathCode(coll.AlgoKernel)
	for _, c := range []struct {
		name string
		m    members.GateMismatch
		out  outcome
		want []string
		is   error
	}{
		{"count", members.GateMismatch{Call: 9, Rank: 2, Theirs: members.GateEntry{Record: half, Path: ce}, Rank0: members.GateEntry{Record: ag, Path: ce}},
			outcomeNothing, []string{"collective 9", "rank 6 called all_gather with count=2048, rank 4 with count=4096", "nothing was queued"}, errs.Mismatch},
		{"paths", members.GateMismatch{Call: 3, Rank: 1, Theirs: members.GateEntry{Record: ag, Path: ce}, Rank0: members.GateEntry{Record: ag, Path: kern}},
			outcomeStopped, []string{"rank 5 ran it on ce, rank 4 on kernel", "context is lost"}, errs.Mismatch},
		{"paths, kernel ended", members.GateMismatch{Call: 3, Rank: 1, Theirs: members.GateEntry{Record: ag, Path: ce}, Rank0: members.GateEntry{Record: ag, Path: kern}},
			outcomeEnded, []string{"rank 5 ran it on ce, rank 4 on kernel", "stopped waiting", "outputs of the calls in flight on the group are not valid", "context is intact"}, errs.Mismatch},
		{"collective", members.GateMismatch{Call: 5, Rank: 1, Theirs: members.GateEntry{Record: ar, Path: ce}, Rank0: members.GateEntry{Record: ag, Path: ce}},
			outcomeStopped, []string{"rank 5 called all_reduce, rank 4 all_gather"}, errs.Mismatch},
		{"exited", members.GateMismatch{Call: 7, Rank: -1, Abandoned: true, Missing: 2},
			outcomeStopped, []string{"rank 6 exited before it made collective 7", "restart"}, errs.PeerExited},
		{"exited, kernel ended", members.GateMismatch{Call: 7, Rank: -1, Abandoned: true, Missing: 2},
			outcomeEnded, []string{"rank 6 exited before it made collective 7", "context is intact", "close it"}, errs.PeerExited},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := gt.mismatch(&c.m, c.out)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant %q in it", err, w)
				}
			}
			if !errors.Is(err, c.is) {
				t.Errorf("%v does not wrap %v", err, c.is)
			}
		})
	}
}

// TestPeerGoneStopsGroup: once a member on another host is gone
// (abortGroup, from the job's presences), every call fails with the first
// reason, naming the rank, before anything is queued.
func TestPeerGoneStopsGroup(t *testing.T) {
	g := fakeGroup(2, 0)
	if err := g.watch.err(); err != nil {
		t.Fatalf("a fresh group is gone: %v", err)
	}
	g.abortGroup(fmt.Errorf("rank 1 (host b) exited: %w", errs.PeerExited), nil)
	g.abortGroup(errors.New("a later reason"), nil)
	_, err := g.Run(context.Background(), gatherReq(g, 1<<10, false))
	if !errors.Is(err, errs.Broken) || !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "rank 1 (host b) exited") {
		t.Fatalf("Run after a member left: %v, want errs.Broken and ErrPeerExited naming rank 1", err)
	}
}

// TestHostGateAborts: in a group that spans hosts, the members on one host
// (here group ranks 0 and 2 of 4: global ranks 0 and 1) compare their
// calls through their host gate. No call waits for an approval (no guard),
// and a difference aborts the group on both members (the group's
// abortGroup), naming the argument with global ranks: the member that
// published second at once, the first through its watcher.
func TestHostGateAborts(t *testing.T) {
	as := goldenAgreements(t, 2)
	type rank struct {
		g      *Group
		gt     *callGate
		errs   chan error
		ticket ticket
	}
	rs := make([]*rank, 2)
	for i := range rs {
		g := &Group{core: core{Head: members.Head{GroupName: "dp", Ranks: []int{0, 10, 1, 11}, Me: 2 * i}, ag: agreements{host: as[i], hostMembers: []int{0, 2}}}}
		r := &rank{g: g, errs: make(chan error, 2)}
		r.gt = hostGate(&g.core, func(err error) { r.errs <- err })
		t.Cleanup(func() { r.gt.close(true) })
		rs[i] = r
	}
	publish := func(r *rank, count uint64) error {
		c := &call{req: backend.Request{Algo: coll.AlgoNCCL, Record: callRec(coll.AllGather, coll.BFloat16, count)}}
		err := r.gt.publish(c, gated(c.req.Algo))
		r.ticket = c.gate
		if err == nil {
			err = r.gt.enqueued(c.gate)
		}
		return err
	}
	// Alike: approved, nothing waits.
	for _, r := range rs {
		if err := publish(r, 4096); err != nil || r.ticket.wait != 0 {
			t.Fatalf("a matching call: %v, waits for %d (a host gate queues no guard)", err, r.ticket.wait)
		}
	}
	if err := publish(rs[0], 4096); err != nil {
		t.Fatal(err)
	}
	err := publish(rs[1], 2048)
	want := []string{"collective 2", "rank 1 called all_gather with count=2048, rank 0 with count=4096", "NCCL communicators were aborted", "context is intact"}
	for i, r := range rs {
		got := err
		if i == 0 || got == nil {
			select {
			case got = <-r.errs:
			case <-time.After(5 * time.Second):
				t.Fatalf("member %d: the difference did not abort the group", i)
			}
		} else if a := <-r.errs; a.Error() != got.Error() {
			t.Errorf("member %d aborted with %v, returned %v", i, a, got)
		}
		if !errors.Is(got, errs.Mismatch) {
			t.Errorf("member %d: %v does not wrap ErrMismatch", i, got)
		}
		for _, w := range want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("member %d: %v\nwant %q in it", i, got, w)
			}
		}
		select {
		case again := <-r.errs:
			t.Errorf("member %d aborted twice: %v", i, again)
		default:
		}
	}
}

// TestHostGateMemberLeft: a member on this host that left before a call
// this rank queued (its state word; a process exit reads the same through
// its pidfd) aborts the group through the watcher, naming the member
// (group rank 2, global rank 1).
func TestHostGateMemberLeft(t *testing.T) {
	as := goldenAgreements(t, 2)
	errc := make(chan error, 2)
	g := &Group{core: core{Head: members.Head{GroupName: "dp", Ranks: []int{0, 10, 1, 11}, Me: 0}, ag: agreements{host: as[0], hostMembers: []int{0, 2}}}}
	gt := hostGate(&g.core, func(err error) { errc <- err })
	t.Cleanup(func() { gt.close(true) })
	as[1].SetState(members.StateLeft) // group rank 2 (global 1) closes
	c := &call{req: backend.Request{Algo: coll.AlgoNCCL, Record: callRec(coll.AllReduce, coll.BFloat16, 64)}}
	if err := gt.publish(c, gated(c.req.Algo)); err != nil {
		t.Fatal(err)
	}
	if err := gt.enqueued(c.gate); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, errs.PeerClosed) || !strings.Contains(err.Error(), "rank 1 closed") || !strings.Contains(err.Error(), "collective 1 on the group was abandoned") {
			t.Errorf("%v: want ErrPeerClosed naming rank 1 and collective 1", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a member that left did not abort the group")
	}
}
