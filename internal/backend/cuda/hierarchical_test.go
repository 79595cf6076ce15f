package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// TestHierRefuses: the hier path serves a group only across hosts, with
// two or more ranks on each, consecutive, and the fd exchange; and only
// all-gather, reduce-scatter and all-reduces that split into a piece per
// rank of a host. Every refusal says which.
func TestHierRefuses(t *testing.T) {
	for _, tc := range []struct {
		host  []int
		spans bool
		fdx   bool
		req   func(g *Group) call
		want  string // "" = served
	}{
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, ""},
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call { return call{req: arReq(g, 1000, coll.BFloat16, false)} }, ""},
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call { return call{req: arReq(g, 1001, coll.BFloat16, false)} }, "does not split into 2 pieces"},
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call {
			r := arReq(g, 1000, coll.BFloat16, false)
			r.Kind = coll.Broadcast
			return call{req: r}
		}, "not broadcast"},
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call {
			r := arReq(g, 1000, coll.Int32, false)
			r.Op = coll.Avg
			return call{req: r}
		}, "round twice"},
		{[]int{0, 0, 1, 1}, true, true, func(g *Group) call {
			r := arReq(g, 1000, coll.Float32, false)
			r.Op = coll.Avg
			return call{req: r}
		}, ""},
		{[]int{0, 0, 0, 0}, false, true, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, "this group is on one"},
		{[]int{0, 1, 0, 1}, true, true, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, "consecutive"},
		{[]int{0, 1, 2, 3}, true, true, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, "two or more ranks on each host"},
		{[]int{0, 0, 0, 1}, true, true, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, "as many ranks on every host"},
		{[]int{0, 0, 1, 1}, true, false, func(g *Group) call { return call{req: gatherReq(g, 1000, false)} }, "fd exchange"},
	} {
		g := fakeGroup(len(tc.host), 1)
		if tc.fdx {
			g.fdx = &rendezvous.FDExchange{}
		}
		g.paths.hier.init(tc.host, tc.spans)
		c := tc.req(g)
		c.req.Algo = coll.AlgoHier
		err := g.paths.hier.refuse(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("hosts %v: refused: %v", tc.host, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("hosts %v %v: got %v, want a refusal saying %q", tc.host, c.req.Kind, err, tc.want)
		}
	}
}

// failExec is an executor whose programs fail (a launch the driver
// refused).
type failExec struct{ nopExec }

func (failExec) program(*cudadrv.Program) error { return errors.New("fake launch failure") }

// TestBrokenTellsPeers: a call whose program fails breaks the group, and
// this host's peers learn it at once from the state word: their verdict on
// this rank is errs.Broken (their waits fail naming it instead of timing
// out).
func TestBrokenTellsPeers(t *testing.T) {
	as := goldenAgreements(t, 2)
	g, _ := goldenGroup(t, goldenCfg{name: "broken", kern: true, ce: true}, 2, 0)
	g.agreement, g.x = as[0], failExec{}
	if err := as[1].Gone(0, false); err != nil {
		t.Fatalf("before: peer's verdict on rank 0: %v", err)
	}
	req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<10, false, "io", 0).req, coll.AlgoLL)
	if _, err := g.Run(context.Background(), req); !errors.Is(err, ErrBroken) {
		t.Fatalf("a failed launch: %v, want ErrBroken", err)
	}
	if err := as[1].Gone(0, false); !errors.Is(err, errs.Broken) {
		t.Fatalf("after: peer's verdict on rank 0: %v, want errs.Broken", err)
	}
	if _, err := g.Run(context.Background(), req); !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), "fake launch failure") {
		t.Fatalf("a later call: %v, want ErrBroken with the first cause", err)
	}
}
