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
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
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
			g.FDs = &rendezvous.FDExchange{}
		}
		g.paths.hier.decide(topology{hostOf: tc.host, spans: tc.spans})
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
	g.ag.group, g.x = as[0], failExec{}
	if err := as[1].Gone(0, false); err != nil {
		t.Fatalf("before: peer's verdict on rank 0: %v", err)
	}
	req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<10, false, "io", 0).req, coll.AlgoLL)
	if _, err := g.Run(context.Background(), req); !errors.Is(err, errs.Broken) {
		t.Fatalf("a failed launch: %v, want errs.Broken", err)
	}
	if err := as[1].Gone(0, false); !errors.Is(err, errs.Broken) {
		t.Fatalf("after: peer's verdict on rank 0: %v, want errs.Broken", err)
	}
	if _, err := g.Run(context.Background(), req); !errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "fake launch failure") {
		t.Fatalf("a later call: %v, want errs.Broken with the first cause", err)
	}
}

// hierLog is an executor that writes, in order, what a hier call issues:
// the parent's scratch and copies, and the children's NCCL calls with
// their requests (buffers named relative to the parent's In, Out and
// scratch).
type hierLog struct {
	nopExec
	name  string
	lines *[]string
	refOf func(p uint64) string
}

func (x *hierLog) scratch(_ *cudadrv.Context, _ uint64, n int64) (uint64, error) {
	*x.lines = append(*x.lines, fmt.Sprintf("scratch %d", n))
	return scratchAt, nil
}

func (x *hierLog) release(*cudadrv.Context, uint64, uint64) {
	*x.lines = append(*x.lines, "release")
}

func (x *hierLog) program(p *cudadrv.Program) error {
	for _, o := range p.Ops() {
		if o.Kind == cudadrv.OpCopy {
			*x.lines = append(*x.lines, fmt.Sprintf("copy %s <- %s (%d)", x.refOf(o.A), x.refOf(o.B), o.C))
		}
	}
	return nil
}

func (x *hierLog) nccl(_ context.Context, _ *bnccl.Comm, req backend.Request, _ bool) (coll.Path, error) {
	*x.lines = append(*x.lines, fmt.Sprintf("%s %v %s -> %s count=%d inplace=%v rec=%#x,%#x",
		x.name, req.Kind, x.refOf(req.In.Ptr), x.refOf(req.Out.Ptr), req.Count, req.InPlace, req.Record[3], req.Record[4]))
	return coll.Path{Algo: coll.AlgoNCCL}, nil
}

// TestHierIssues: a hier call on rank 1 of 2 hosts x 2 ranks issues its
// schedule as the children's calls and the parent's copies, in order, on
// the parent's buffers (an all-gather, reduce-scatter and all-reduce, in
// and out of place): what the simulator checked as data, here as calls.
func TestHierIssues(t *testing.T) {
	const me = 1 // host 0, local index 1
	for _, tc := range []struct {
		kind    coll.Kind
		inPlace bool
		want    []string
	}{
		{coll.AllGather, false, []string{
			"scratch 2048",
			"cross all_gather in+0 -> scratch+0 count=512 inplace=false rec=0x0,0x0",
			"copy out+1024 <- scratch+0 (1024)", "copy out+3072 <- scratch+1024 (1024)",
			"host all_gather out+1024 -> out+0 count=512 inplace=true rec=0x0,0x0",
			"host all_gather out+3072 -> out+2048 count=512 inplace=true rec=0x0,0x0",
			"release"}},
		{coll.AllGather, true, []string{
			"scratch 2048",
			"cross all_gather out+1024 -> scratch+0 count=512 inplace=false rec=0x0,0x0",
			"copy out+1024 <- scratch+0 (1024)", "copy out+3072 <- scratch+1024 (1024)",
			"host all_gather out+1024 -> out+0 count=512 inplace=true rec=0x0,0x0",
			"host all_gather out+3072 -> out+2048 count=512 inplace=true rec=0x0,0x0",
			"release"}},
		{coll.ReduceScatter, false, []string{
			"scratch 2048",
			"host reduce_scatter in+0 -> scratch+0 count=512 inplace=false rec=0x0,0x0",
			"host reduce_scatter in+2048 -> scratch+1024 count=512 inplace=false rec=0x0,0x0",
			"cross reduce_scatter scratch+0 -> out+0 count=512 inplace=false rec=0x0,0x0",
			"release"}},
		{coll.ReduceScatter, true, []string{
			"scratch 2048",
			"host reduce_scatter in+0 -> scratch+0 count=512 inplace=false rec=0x0,0x0",
			"host reduce_scatter in+2048 -> scratch+1024 count=512 inplace=false rec=0x0,0x0",
			"cross reduce_scatter scratch+0 -> in+1024 count=512 inplace=false rec=0x0,0x0",
			"release"}},
		{coll.AllReduce, false, []string{
			"host reduce_scatter in+0 -> out+1024 count=512 inplace=false rec=0x0,0x0",
			"cross all_reduce out+1024 -> out+1024 count=512 inplace=true rec=0x0,0x0",
			"host all_gather out+1024 -> out+0 count=512 inplace=true rec=0x0,0x0"}},
		{coll.AllReduce, true, []string{
			"host reduce_scatter out+0 -> out+1024 count=512 inplace=true rec=0x0,0x0",
			"cross all_reduce out+1024 -> out+1024 count=512 inplace=true rec=0x0,0x0",
			"host all_gather out+1024 -> out+0 count=512 inplace=true rec=0x0,0x0"}},
	} {
		g, _ := goldenGroup(t, goldenCfg{name: "hier", nccl: "full"}, 4, me)
		g.FDs = &rendezvous.FDExchange{}
		g.paths.hier.decide(topology{hostOf: []int{0, 0, 1, 1}, spans: true})
		host, _ := goldenGroup(t, goldenCfg{name: "hier/host", nccl: "full"}, 2, 1)
		cross, _ := goldenGroup(t, goldenCfg{name: "hier/cross", nccl: "full"}, 2, 0)
		count := int64(512) // bf16 per rank: 1 KiB chunks (all-reduce: the tensor, 2 pieces of 512)
		if tc.kind == coll.AllReduce {
			count = 1024
		}
		req := forced(makeReq(g, tc.kind, coll.BFloat16, coll.Sum, count, tc.inPlace, "io", 0).req, coll.AlgoHier)
		req = req.Shaped(4, me)
		in, out := req.In.Ptr, req.Out.Ptr
		refOf := func(p uint64) string {
			switch {
			case p >= scratchAt && p < scratchAt+1<<20:
				return fmt.Sprintf("scratch+%d", p-scratchAt)
			case p >= out && p < out+1<<20 && !(tc.kind == coll.ReduceScatter && tc.inPlace):
				return fmt.Sprintf("out+%d", p-out)
			case p >= in && p < in+1<<20:
				return fmt.Sprintf("in+%d", p-in)
			}
			return fmt.Sprintf("%#x", p)
		}
		var lines []string
		g.x = &hierLog{name: "parent", lines: &lines, refOf: refOf}
		host.x = &hierLog{name: "host", lines: &lines, refOf: refOf}
		cross.x = &hierLog{name: "cross", lines: &lines, refOf: refOf}
		host.peers.segs.Add(1, seg1(g)) // the parent's segment, registered in the children
		cross.peers.segs.Add(1, seg1(g))
		g.paths.hier.kids.Store(&hierKids{host: host, cross: cross})
		path, err := g.Run(context.Background(), req)
		if err != nil || path.Algo != coll.AlgoHier {
			t.Fatalf("%v in place %v: path %v, %v", tc.kind, tc.inPlace, path, err)
		}
		if got, want := strings.Join(lines, "\n"), strings.Join(tc.want, "\n"); got != want {
			t.Errorf("%v in place %v issued\n%s\nwant\n%s", tc.kind, tc.inPlace, got, want)
		}
	}
}

// TestHierMakingStops: the group's abort (a peer gone, a call log
// difference: a peer took another path) ends the children's creation at
// once with the abort's reason, also an abort that came before it began;
// once made, a later abort no longer reaches the finished creation.
func TestHierMakingStops(t *testing.T) {
	cause := fmt.Errorf("rank 2 called all_reduce via nccl: %w", errs.Mismatch)
	for _, before := range []bool{false, true} {
		g := fakeGroup(4, 1)
		h := &g.paths.hier
		if before {
			g.abortGroup(cause, nil)
		}
		ctx, done := h.making(context.Background())
		if !before {
			if ctx.Err() != nil {
				t.Fatalf("a creation of a live group began cancelled: %v", context.Cause(ctx))
			}
			g.abortGroup(cause, nil)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("abort before=%t: the creation's context was not cancelled", before)
		}
		if err := context.Cause(ctx); !errors.Is(err, errs.Mismatch) {
			t.Errorf("abort before=%t: cause %v, want the abort's", before, err)
		}
		done()
		if h.stopMaking.Load() != nil {
			t.Errorf("abort before=%t: the stop outlived the creation", before)
		}
	}
}
