package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
)

// TestNCCLAgreed: a communicator some rank lacks is used by none, the
// window-free one only where every rank has both, and the reason names
// the first other rank without one.
func TestNCCLAgreed(t *testing.T) {
	ranks := []int{4, 5, 6}
	for _, tc := range []struct {
		name        string
		all         []string
		comm, plain bool
		why         string // "" = nil
	}{
		{"all both", []string{"true|true|", "true|true|", "true|true|"}, true, true, ""},
		{"no windows anywhere", []string{"true|false|", "true|false|", "true|false|"}, true, false, ""},
		{"one without plain", []string{"true|true|", "true|false|", "true|true|"}, true, false, ""},
		{"one without comm", []string{"true|true|", "false|false|out of memory", "true|true|"}, false, false, "rank 5 has no NCCL communicator (out of memory)"},
		{"reason with bars", []string{"true|true|", "false|false|a|b", "true|true|"}, false, false, "(a|b)"},
		{"this rank without", []string{"false|false|mine", "true|true|", "true|true|"}, false, false, ""},
		{"unreadable", []string{"true|true|", "garbage", "true|true|"}, false, false, `unreadable report "garbage"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := make([][]byte, len(tc.all))
			for i, v := range tc.all {
				all[i] = []byte(v)
			}
			comm, plain, why := ncclAgreed(ranks, 0, all)
			if comm != tc.comm || plain != tc.plain {
				t.Errorf("comm %v plain %v, want %v %v", comm, plain, tc.comm, tc.plain)
			}
			switch {
			case tc.why == "" && why != nil:
				t.Errorf("why %v, want nil", why)
			case tc.why != "" && (why == nil || !strings.Contains(why.Error(), tc.why)):
				t.Errorf("why %v, want %q", why, tc.why)
			}
		})
	}
}

// TestAgreeNCCLExchanges: every rank of a group takes part in the
// agreement, also one without NCCL, and ends with the same view; a rank
// without a communicator keeps its own reason.
func TestAgreeNCCLExchanges(t *testing.T) {
	st := testStore(t)
	ranks := []int{0, 1}
	gs := make([]*Group, len(ranks))
	for me := range ranks {
		g := fakeGroup(len(ranks), me)
		g.Gather = members.NewGather("g", st, "test/agree", ranks, me, time.Minute)
		g.nccl = ncclGroup{err: fmt.Errorf("rank %d: no NCCL here", me), winWhy: "no NCCL"}
		gs[me] = g
	}
	var wg sync.WaitGroup
	res := make([]error, len(gs))
	for i, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = g.nccl.agree(context.Background(), &g.Head)
		}()
	}
	wg.Wait()
	for i, g := range gs {
		if res[i] != nil {
			t.Errorf("rank %d: %v", i, res[i])
		}
		if g.nccl.comm != nil || g.nccl.plain != nil || !strings.Contains(g.nccl.err.Error(), fmt.Sprintf("rank %d: no NCCL here", i)) {
			t.Errorf("rank %d after the agreement: %+v", i, g.nccl)
		}
	}

	// A peer that never reports fails the setup (bounded), never a view of
	// its own.
	g := fakeGroup(len(ranks), 0)
	g.Gather = members.NewGather("g", st, "test/agree-alone", ranks, 0, 200*time.Millisecond)
	if err := g.nccl.agree(context.Background(), &g.Head); err == nil || !strings.Contains(err.Error(), "agreeing on the NCCL communicators") {
		t.Errorf("agreement without the peer: %v, want its failure", err)
	}
}

// TestNCCLUnavailableWraps: the refusals and auto's no-path error wrap why
// NCCL is unavailable, so a sentinel inside (a peer that exited during its
// creation) still matches.
func TestNCCLUnavailableWraps(t *testing.T) {
	g := fakeGroup(2, 0)
	g.caps.ce = false
	g.nccl = ncclGroup{err: fmt.Errorf("creating the communicator: %w", errs.PeerExited), winWhy: "no communicator"}
	c := call{req: gatherReq(g, 1000, false)}
	f := autoFacts{p: &g.paths, c: &c}
	for what, err := range map[string]error{
		"nccl":        g.paths.nccl.refuse(c),
		"nccl-window": g.paths.window.refuse(c),
		"auto":        f.noPath(),
	} {
		if !errors.Is(err, errs.PeerExited) || !errors.Is(err, errs.NotSupported) {
			t.Errorf("%s: %v: want it to match the cause (errs.PeerExited) and errs.NotSupported", what, err)
		}
	}
	g.nccl = ncclGroup{} // no reason recorded: still an error that says so
	if err := g.paths.nccl.refuse(c); err == nil || strings.Contains(err.Error(), "%!") {
		t.Errorf("without a reason: %v", err)
	}
}
