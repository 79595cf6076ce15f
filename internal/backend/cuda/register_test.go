package cuda

import (
	"context"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/cuda/internal/hier"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/pool"
)

// TestRegisterUndoneWithHierChild: a registration that a hier child group
// fails leaves no trace: not the group's, not replayed into children, not
// the other child's (it deregisters again); the pool's retry of the same
// segment then registers it.
func TestRegisterUndoneWithHierChild(t *testing.T) {
	for _, failing := range []string{"host", "cross"} {
		t.Run(failing, func(t *testing.T) {
			st := testStore(t)
			const gran = 2 << 20
			seg := pool.Segment{ID: 1, Base: 0x7000_0000, Size: gran}
			b := &Backend{ctx: &cudadrv.Context{}, gran: gran, prov: newProvider(&cudadrv.Context{}, gran)}
			b.prov.segs[seg.ID] = &segment{base: seg.Base, size: seg.Size, fd: -1}
			mk := func(name string, ranks []int, timeout time.Duration) *Group {
				g := &Group{core: core{Head: members.Head{GroupName: name, Ranks: ranks, Me: 0, Store: st, Timeout: timeout}, b: b, prog: cudadrv.NewProgram(64), x: nopExec{}}}
				g.Prefix = "test/" + t.Name() + "/" + name
				g.faults, g.hs = faults{g: &g.core}, checkedHandshake{g: &g.core}
				g.paths.init(&g.core)
				g.Gather = members.NewGather(name, st, g.Prefix, g.Ranks, 0, timeout)
				return g
			}
			parent := mk("p", []int{0}, time.Minute)
			l, err := hier.NewLayout([]int{0, 0, 1, 1})
			if err != nil {
				t.Fatal(err)
			}
			parent.paths.hier.layout = l
			// The failing child's peer (world rank 1) never registers: its
			// all-gather times out, as where a peer fails its registration.
			kids := &hierKids{host: mk("p/hier-host0", []int{0}, time.Minute), cross: mk("p/hier-local0", []int{0}, time.Minute)}
			bad := kids.host
			if failing == "cross" {
				bad = kids.cross
			}
			bad.Ranks = []int{0, 1}
			bad.Timeout = 200 * time.Millisecond
			bad.Gather = members.NewGather(bad.GroupName, st, bad.Prefix, bad.Ranks, 0, bad.Timeout)
			parent.paths.hier.kids.Store(kids)

			if err := parent.Register(context.Background(), seg); err == nil {
				t.Fatalf("Register succeeded although the %s child's registration failed", failing)
			}
			if n := parent.Registered(); n != 0 {
				t.Errorf("after the failed Register the group has %d segment(s), want 0", n)
			}
			if n := len(parent.paths.hier.segs); n != 0 {
				t.Errorf("after the failed Register the hier path replays %d segment(s) into children, want 0", n)
			}
			for _, c := range []*Group{kids.host, kids.cross} {
				if n := c.Registered(); n != 0 {
					t.Errorf("after the failed Register child %q has %d segment(s), want 0", c.GroupName, n)
				}
			}

			// The pool registers the segment again at the next scope end.
			bad.Ranks, bad.Timeout = []int{0}, time.Minute
			bad.Gather = members.NewGather(bad.GroupName, st, bad.Prefix+"/retry", bad.Ranks, 0, bad.Timeout)
			if err := parent.Register(context.Background(), seg); err != nil {
				t.Fatalf("registering again: %v", err)
			}
			for _, g := range []*Group{parent, kids.host, kids.cross} {
				if n := g.Registered(); n != 1 {
					t.Errorf("after registering again %q has %d segment(s), want 1", g.GroupName, n)
				}
			}
			if err := parent.Deregister(context.Background(), seg); err != nil {
				t.Fatalf("Deregister: %v", err)
			}
			for _, g := range []*Group{parent, kids.host, kids.cross} {
				if n := g.Registered(); n != 0 {
					t.Errorf("after Deregister %q has %d segment(s), want 0", g.GroupName, n)
				}
			}
		})
	}
}
