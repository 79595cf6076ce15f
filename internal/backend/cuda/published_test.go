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
	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// Once Run published a call at the gate, its peers may be approved and
// wait for this rank on the GPU: what can fail on this rank alone is done
// before (a refusal: nothing published, the group goes on), and a failure
// after breaks the group, which tells this host's peers at once (the
// state word: their verdict on this rank is errs.Broken).

// gatedPair is two ranks of one host, sharing a gate (rank r is gs[r],
// its agreement as[r]), running exec x.
func gatedPair(t *testing.T, cfg goldenCfg, x executor) ([]*Group, []*members.HostAgreement) {
	t.Helper()
	as := goldenAgreements(t, 2)
	gs := make([]*Group, 2)
	for r := range gs {
		g, _ := goldenGroup(t, cfg, 2, r)
		attachGate(g, as[r])
		g.x = x
		gs[r] = g
	}
	return gs, as
}

// wantBroken checks that g is broken by a failure after its call was
// published: its peer (as) reads errs.Broken in its state word, and its
// next call is refused with errs.Broken.
func wantBroken(t *testing.T, g *Group, peer *members.HostAgreement, req backend.Request) {
	t.Helper()
	if peer != nil {
		if err := peer.Gone(g.Me, false); !errors.Is(err, errs.Broken) {
			t.Errorf("the peer's verdict on rank %d: %v, want errs.Broken", g.Me, err)
		}
	}
	if _, err := g.Run(context.Background(), req); !errors.Is(err, errs.Broken) {
		t.Errorf("the next call: %v, want errs.Broken", err)
	}
}

// ctxExec issues nothing; it ends cancel at a call's first program (a
// gated NCCL call's guard, queued after publish), and hands an NCCL call
// made with a done context to the driver's executor (bnccl.Comm.RunDecided
// refuses it before it touches NCCL).
type ctxExec struct {
	nopExec
	cancel *context.CancelFunc
}

func (x ctxExec) program(*cudadrv.Program) error {
	if c := *x.cancel; c != nil {
		c()
	}
	return nil
}

func (ctxExec) nccl(ctx context.Context, c *bnccl.Comm, req backend.Request, win bool) (coll.Path, error) {
	if ctx.Err() != nil {
		return driver{}.nccl(ctx, c, req, win)
	}
	return coll.Path{Algo: coll.AlgoNCCL}, nil
}

// TestRunContextBeforePublish: a call whose context ended before Run is
// refused with the context's error and publishes nothing (the group goes
// on, in step with its peers); one whose context ends after its call was
// published (while its guard is queued) is still made, NCCL's call too.
func TestRunContextBeforePublish(t *testing.T) {
	var cancel context.CancelFunc
	gs, as := gatedPair(t, goldenCfg{name: "nc", kern: true, ce: true, nccl: "full"}, ctxExec{cancel: &cancel})
	req := func(g *Group) backend.Request {
		return forced(makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, false, "-", 0).req, coll.AlgoNCCL)
	}
	done, end := context.WithCancel(context.Background())
	end()
	if _, err := gs[0].Run(done, req(gs[0])); !errors.Is(err, context.Canceled) || errors.Is(err, errs.Broken) {
		t.Fatalf("a call with a done context: %v, want context.Canceled, not errs.Broken", err)
	}
	if p := gs[0].gate.c.Published(); p != 0 {
		t.Fatalf("a call refused for its context published %d call(s) at the gate", p)
	}
	if err := as[1].Gone(0, false); err != nil {
		t.Errorf("the peer's verdict on rank 0 after a refusal: %v", err)
	}
	// Ends once the call is published and its guard queued (rank 1 has
	// not published: no approval at publish).
	ctx, c := context.WithCancel(context.Background())
	cancel = c
	if _, err := gs[0].Run(ctx, req(gs[0])); err != nil {
		t.Fatalf("a call whose context ended after it was published: %v, want it made", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the context did not end after publish (no guard queued?)")
	}
	cancel = nil
	for i := 0; i < 2; i++ {
		if _, err := gs[1].Run(context.Background(), req(gs[1])); err != nil {
			t.Fatalf("rank 1, call %d: %v", i+1, err)
		}
	}
	if _, err := gs[0].Run(context.Background(), req(gs[0])); err != nil {
		t.Fatalf("rank 0's next call: %v", err)
	}
	if a, f := gs[1].gate.c.Approved(), gs[1].gate.c.Failed(); a != 2 || f != nil {
		t.Errorf("gate: %d call(s) approved, failed %v; want 2, none (the ranks in step)", a, f)
	}
}

// failNCCL is an executor whose NCCL calls fail.
type failNCCL struct{ nopExec }

func (failNCCL) nccl(context.Context, *bnccl.Comm, backend.Request, bool) (coll.Path, error) {
	return coll.Path{}, errors.New("fake: ncclAllGather failed")
}

// TestNCCLFailureBreaksGroup: an NCCL call that fails after it was
// published breaks the group (the peer is told), with or without checked
// mode's handshake.
func TestNCCLFailureBreaksGroup(t *testing.T) {
	for _, checked := range []bool{false, true} {
		gs, as := gatedPair(t, goldenCfg{name: "nf", kern: true, ce: true, nccl: "full"}, failNCCL{})
		req := forced(makeReq(gs[0], coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, false, "-", 0).req, coll.AlgoNCCL)
		req.Checked = checked
		_, err := gs[0].Run(context.Background(), req)
		if !errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "ncclAllGather failed") {
			t.Fatalf("checked %v: a failed NCCL call: %v, want errs.Broken with NCCL's error", checked, err)
		}
		wantBroken(t, gs[0], as[1], req)
	}
}

// abortDuringNCCL: a member on another host exits while this rank's NCCL
// call is being made: abortGroup stops the communicator, and the call
// fails as bnccl.Comm fails a call on an aborted one (ErrClosed).
type abortDuringNCCL struct {
	nopExec
	g *Group
}

func (x abortDuringNCCL) nccl(context.Context, *bnccl.Comm, backend.Request, bool) (coll.Path, error) {
	x.g.abortGroup(fmt.Errorf("rank 3 (host b) exited: %w", errs.PeerExited), nil)
	return coll.Path{}, fmt.Errorf("nccl: group %q: %w", x.g.GroupName, errs.Closed)
}

// TestAbortDuringNCCLNamesAbort: a call that fails because the group was
// aborted meanwhile fails with the abort's reason (errs.Broken and
// ErrPeerExited, naming the rank), as every later call does.
func TestAbortDuringNCCLNamesAbort(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "span", nccl: "full"}, 4, 0)
	g.x = abortDuringNCCL{g: g}
	req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<16, false, "-", 0).req, coll.AlgoNCCL)
	for i := 0; i < 2; i++ {
		_, err := g.Run(context.Background(), req)
		if !errors.Is(err, errs.PeerExited) || !errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "rank 3 (host b) exited") {
			t.Errorf("call %d: %v, want errs.Broken and ErrPeerExited naming rank 3", i+1, err)
		}
	}
}

// TestLaunchFailureBreaksDespiteReport: a call whose launch fails while an
// earlier kernel's mismatch report waits in the fault words breaks the
// group (the report explains the earlier call, not this one, which was
// published and never queued); the error carries both.
func TestLaunchFailureBreaksDespiteReport(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	gs, as := gatedPair(t, goldenCfg{name: "mask", kern: true, ce: true}, failExec{})
	g := gs[0]
	w, err := cudadrv.NewHostMapped(b.ctx, faultWords)
	if err != nil {
		t.Fatal(err)
	}
	g.faults.words = w
	// An earlier kernel's mismatch report (a kernel path: the group stays
	// usable).
	w.Store(faultPeer, 1)
	w.Store(faultMine, 0x1111)
	w.Store(faultTheirs, 0x2222)
	w.Store(faultEpoch, 3)
	w.Store(faultKind, kindMismatch)
	w.Store(faultSet, 1)
	req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<10, false, "io", 0).req, coll.AlgoLL)
	_, err = g.Run(context.Background(), req)
	if !errors.Is(err, errs.Broken) || !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), "fake launch failure") {
		t.Errorf("a failed launch with a report waiting: %v, want errs.Broken naming the launch failure, and the report (ErrMismatch)", err)
	}
	g.x = nopExec{}
	wantBroken(t, g, as[1], req)
}

// TestLCStagingRefusedBeforePublish: an lc call whose staging cannot be
// allocated (out of memory on this GPU only) is refused before it is
// published: the group goes on, and the same call made again once memory
// is free meets the peer's at the gate.
func TestLCStagingRefusedBeforePublish(t *testing.T) {
	if !onFakeCUDA(t, "cuMemCreate:0:2") {
		return
	}
	fb := fakeBackend(t)
	gs, as := gatedPair(t, goldenCfg{name: "lc", kern: true, ce: true}, nopExec{})
	gs[0].b.ctx, gs[0].b.gran = fb.ctx, fb.gran
	gs[0].paths.lc.staging = nil // rank 0's first lc call allocates it
	req := func(g *Group) backend.Request {
		return forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<16, false, "io", 0).req, coll.AlgoLowContention)
	}
	_, err := gs[0].Run(context.Background(), req(gs[0]))
	if err == nil || errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "lc staging") {
		t.Fatalf("an lc call without staging memory: %v, want the allocation's failure, not errs.Broken", err)
	}
	if p := gs[0].gate.c.Published(); p != 0 {
		t.Fatalf("a refused lc call published %d call(s) at the gate", p)
	}
	if err := as[1].Gone(0, false); err != nil {
		t.Errorf("the peer's verdict on rank 0 after a refusal: %v", err)
	}
	if _, err := gs[1].Run(context.Background(), req(gs[1])); err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	setFakeCUDA(t, "") // memory is free again
	if _, err := gs[0].Run(context.Background(), req(gs[0])); err != nil {
		t.Fatalf("rank 0's lc call again: %v", err)
	}
	if a, f := gs[1].gate.c.Approved(), gs[1].gate.c.Failed(); a != 1 || f != nil {
		t.Errorf("gate: %d call(s) approved, failed %v; want 1, none (the ranks in step)", a, f)
	}
}

// TestFenceRefusedBeforePublish: the fence event of a caller's stream is
// made before the call is published: where it cannot be, the call is
// refused and the group goes on.
func TestFenceRefusedBeforePublish(t *testing.T) {
	if !onFakeCUDA(t, "cuEventCreate:0:2") {
		return
	}
	fb := fakeBackend(t)
	gs, as := gatedPair(t, goldenCfg{name: "fence", kern: true, ce: true}, nopExec{})
	g := gs[0]
	g.b.ctx = fb.ctx
	req := forced(makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req, coll.AlgoKernel)
	req.Stream = 0x70 // a caller's stream the group has no fence on
	_, err := g.Run(context.Background(), req)
	if err == nil || errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "fence for stream") {
		t.Fatalf("a call whose stream's fence cannot be made: %v, want the fence's failure, not errs.Broken", err)
	}
	if p := g.gate.c.Published(); p != 0 {
		t.Fatalf("the refused call published %d call(s) at the gate", p)
	}
	if err := as[1].Gone(0, false); err != nil {
		t.Errorf("the peer's verdict on rank 0 after a refusal: %v", err)
	}
	setFakeCUDA(t, "")
	if _, err := g.Run(context.Background(), req); err != nil {
		t.Errorf("the call again: %v", err)
	}
}

// TestIssueFailureAfterPublishBreaks: a path that fails to build its
// program after the call was published (here lc, given too few side
// streams) breaks the group.
func TestIssueFailureAfterPublishBreaks(t *testing.T) {
	gs, as := gatedPair(t, goldenCfg{name: "lcside", kern: true, ce: true}, nopExec{})
	g := gs[0]
	side := g.st.h.side
	g.st.h.side = nil
	req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<16, false, "io", 0).req, coll.AlgoLowContention)
	if _, err := g.Run(context.Background(), req); !errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "side streams") {
		t.Fatalf("an lc call that cannot be built: %v, want errs.Broken saying why", err)
	}
	g.st.h.side = side
	wantBroken(t, g, as[1], req)
}

// noScratch is an executor whose scratch allocations fail (out of memory
// on this rank only).
type noScratch struct{ nopExec }

func (noScratch) scratch(*cudadrv.Context, uint64, int64) (uint64, error) {
	return 0, errors.New("fake: out of memory")
}

// TestHierFailureBreaks: a hier call that fails on this rank after it was
// published (its scratch) breaks the group and both child groups, whose
// peers wait for this rank's steps.
func TestHierFailureBreaks(t *testing.T) {
	const me = 1
	g, _ := goldenGroup(t, goldenCfg{name: "hier", nccl: "full"}, 4, me)
	g.FDs = &rendezvous.FDExchange{}
	g.paths.hier.decide(topology{hostOf: []int{0, 0, 1, 1}, spans: true})
	host, _ := goldenGroup(t, goldenCfg{name: "hier/host", nccl: "full"}, 2, 1)
	cross, _ := goldenGroup(t, goldenCfg{name: "hier/cross", nccl: "full"}, 2, 0)
	host.peers.segs.Add(1, seg1(g))
	cross.peers.segs.Add(1, seg1(g))
	host.x, cross.x = nopExec{}, nopExec{}
	g.paths.hier.kids.Store(&hierKids{host: host, cross: cross})
	req := forced(makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 512, false, "io", 0).req, coll.AlgoHier).Shaped(4, me)
	g.x = noScratch{}
	_, err := g.Run(context.Background(), req)
	if !errors.Is(err, errs.Broken) || !strings.Contains(err.Error(), "scratch") {
		t.Fatalf("a hier call whose scratch fails: %v, want errs.Broken saying why", err)
	}
	g.x = nopExec{}
	wantBroken(t, g, nil, req)
	for _, c := range []*Group{host, cross} {
		if c.broken == nil {
			t.Errorf("child %q is not broken", c.GroupName)
		}
	}
}

// busyStream keeps the backend's stream busy until the rules change.
const busyStream = "cuStreamQuery:0:600,cuStreamSynchronize:0:-1"

// TestSynchronizeStopsForOpenAbortsOnly: Synchronize stops waiting for the
// stream when an open group that spans hosts is aborted, with the abort's
// error; once that group is closed, or for an abort of a group the backend
// does not list, it waits until the stream is idle.
func TestSynchronizeStopsForOpenAbortsOnly(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	gone := fmt.Errorf("rank 1 (host b) exited: %w", errs.PeerExited)
	g, _ := fakeGroupOn(t, b, time.Minute)
	b.mu.Lock()
	b.groups = append(b.groups, g)
	b.mu.Unlock()
	setFakeCUDA(t, busyStream)
	go func() {
		time.Sleep(100 * time.Millisecond)
		g.abortGroup(gone, nil)
	}()
	if err := b.Synchronize(context.Background(), time.Minute); !errors.Is(err, errs.PeerExited) {
		t.Fatalf("Synchronize while an open group is aborted: %v, want its error", err)
	}
	b.forget(g) // the user closed the aborted group
	drains := func() {
		time.Sleep(200 * time.Millisecond)
		setFakeCUDA(t, "")
	}
	go drains()
	if err := b.Synchronize(context.Background(), time.Minute); err != nil {
		t.Errorf("Synchronize once the aborted group was closed: %v, want nil when the stream drained", err)
	}
	// Aborted and never listed (closed before Synchronize looked, or still
	// being made): the abort ends the wait, and Synchronize waits on.
	other, _ := fakeGroupOn(t, b, time.Minute)
	other.abortGroup(gone, nil)
	setFakeCUDA(t, busyStream)
	go drains()
	if err := b.Synchronize(context.Background(), time.Minute); err != nil {
		t.Errorf("Synchronize after an abort of a group the backend does not list: %v, want nil when the stream drained", err)
	}
}
