package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
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
		t.Errorf("ended without a gate: %v, want ErrBroken", err)
	}
	if w := gt.stopWord(); w != 0 {
		t.Errorf("stopWord without a gate: %#x, want 0 (the kernels do not poll)", w)
	}
}

// TestGatePaths: every algorithm has a gate code that names it back, and
// exactly the copy-engine and NCCL paths wait for approval.
func TestGatePaths(t *testing.T) {
	for _, a := range coll.Algos() {
		c := agree.PathCode(a)
		if c == 0 || agree.PathOf(c) != a {
			t.Errorf("%s: code %d names %q", a, c, agree.PathOf(c))
		}
		want := a == coll.AlgoCE || a == coll.AlgoLowContention || a == coll.AlgoNCCL || a == coll.AlgoNCCLWindow
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
	gt := &callGate{g: &Group{name: "tp", ranks: []int{4, 5, 6}}}
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
// (peerGone, from the job's presences), every call fails with the first
// reason, naming the rank, before anything is queued.
func TestPeerGoneStopsGroup(t *testing.T) {
	g := fakeGroup(2, 0)
	if err := g.goneErr(); err != nil {
		t.Fatalf("a fresh group is gone: %v", err)
	}
	g.peerGone(fmt.Errorf("rank 1 (host b) exited: %w", errs.PeerExited), nil)
	g.peerGone(errors.New("a later reason"), nil)
	_, err := g.Run(context.Background(), gatherReq(g, 1<<10, false))
	if !errors.Is(err, ErrBroken) || !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "rank 1 (host b) exited") {
		t.Fatalf("Run after a member left: %v, want ErrBroken and ErrPeerExited naming rank 1", err)
	}
}
