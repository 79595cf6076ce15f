package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cuda/internal/hier"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/pool"
)

// Error paths of allocation, deregistration and teardown, on the fake CUDA
// driver (fakecuda_test.go): nothing is lost, released twice or pulled from
// under running work, and every failure is reported.

// neverDone makes every event wait time out: a collective that never ends
// (a peer died in it).
const neverDone = "cuEventQuery:0:600,cuEventSynchronize:0:-1"

// fakeGroupOn is a two-rank group on b by hand (no setup), with one
// segment registered: this rank's copy and one peer mapping, and the fence
// event quiesce records.
func fakeGroupOn(t *testing.T, b *Backend, timeout time.Duration) (*Group, pool.Segment) {
	t.Helper()
	g := &Group{core: core{Head: members.Head{GroupName: "t", Ranks: []int{0, 1}, Me: 0, Timeout: timeout}, b: b, prog: cudadrv.NewProgram(64), x: driver{}}}
	g.faults, g.hs = faults{g: &g.core}, checkedHandshake{g: &g.core}
	g.paths.init(&g.core)
	var err error
	if g.st.last, err = cudadrv.NewEvent(b.ctx, false); err != nil {
		t.Fatal(err)
	}
	seg := pool.Segment{ID: 1, Base: 0x1000_0000, Size: 2 << 20}
	g.peers.segs.Add(seg.ID, &peerSeg{size: seg.Size, bases: []uint64{seg.Base, 0x2000_0000}})
	return g, seg
}

// TestDeregisterKeepsSegmentInFlight: Deregister whose wait for the
// group's work times out unmaps nothing (the work may still read the
// peers' copies) and keeps the segment registered; once the work ended, a
// second Deregister unmaps it.
func TestDeregisterKeepsSegmentInFlight(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	g, seg := fakeGroupOn(t, b, 200*time.Millisecond)
	g.st.usedOwn = true // a collective ran on the backend's stream
	setFakeCUDA(t, neverDone)
	err := g.Deregister(context.Background(), seg)
	if !errors.Is(err, errWorkInFlight) || !strings.Contains(err.Error(), "stays registered") {
		t.Fatalf("Deregister with work in flight: %v, want errWorkInFlight saying the segment stays registered", err)
	}
	if n := fakeCUDACalls(t)["cuMemUnmap"]; n != 0 {
		t.Errorf("Deregister with work in flight unmapped %d peer mapping(s) the work may still read", n)
	}
	if n := g.Registered(); n != 1 {
		t.Errorf("after a failed Deregister %d segment(s) registered, want 1 (the pool counts it registered)", n)
	}
	setFakeCUDA(t, "") // the work ends
	if err := g.Deregister(context.Background(), seg); err != nil {
		t.Fatalf("Deregister once the work ended: %v", err)
	}
	if n := fakeCUDACalls(t)["cuMemUnmap"]; n != 1 {
		t.Errorf("Deregister unmapped %d peer mapping(s), want 1", n)
	}
	if n := g.Registered(); n != 0 {
		t.Errorf("after Deregister %d segment(s) registered, want 0", n)
	}
}

// TestDeregisterKeepsSegmentChildInFlight: where a hier child's work is
// still in flight, the child and the group keep the segment; the next
// Deregister finishes (the other child, done the first time, is skipped).
func TestDeregisterKeepsSegmentChildInFlight(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	parent, seg := fakeGroupOn(t, b, time.Minute)
	l, err := hier.NewLayout([]int{0, 0, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	parent.paths.hier.layout, parent.paths.hier.segs = l, []pool.Segment{seg}
	host, _ := fakeGroupOn(t, b, 200*time.Millisecond)
	cross, _ := fakeGroupOn(t, b, time.Minute)
	host.GroupName, cross.GroupName = "t/hier-host0", "t/hier-local0"
	parent.paths.hier.kids.Store(&hierKids{host: host, cross: cross})
	host.st.usedOwn = true // the host child's step of a hier call still runs
	setFakeCUDA(t, neverDone)
	if err := parent.Deregister(context.Background(), seg); !errors.Is(err, errWorkInFlight) {
		t.Fatalf("Deregister with a child's work in flight: %v, want errWorkInFlight", err)
	}
	if parent.Registered() != 1 || host.Registered() != 1 || cross.Registered() != 0 || len(parent.paths.hier.segs) != 1 {
		t.Errorf("after the failed Deregister: group %d, host child %d, cross child %d, replayed %d; want 1, 1, 0, 1",
			parent.Registered(), host.Registered(), cross.Registered(), len(parent.paths.hier.segs))
	}
	if n := fakeCUDACalls(t)["cuMemUnmap"]; n != 1 { // the cross child's peer mapping
		t.Errorf("%d unmap(s), want 1 (the cross child's)", n)
	}
	setFakeCUDA(t, "")
	if err := parent.Deregister(context.Background(), seg); err != nil {
		t.Fatalf("Deregister once the work ended: %v", err)
	}
	if parent.Registered() != 0 || host.Registered() != 0 || len(parent.paths.hier.segs) != 0 {
		t.Errorf("after Deregister: group %d, host child %d, replayed %d; want 0", parent.Registered(), host.Registered(), len(parent.paths.hier.segs))
	}
	if n := fakeCUDACalls(t)["cuMemUnmap"]; n != 3 {
		t.Errorf("%d unmap(s) in all, want 3 (one peer mapping per group)", n)
	}
}

// TestCreateLocalCleansUp: a segment whose allocation handle cannot be
// released after the export closes the exported fd, unmaps, and does not
// release the handle again; one whose export fails releases the handle
// once and unmaps. The provider keeps neither.
func TestCreateLocalCleansUp(t *testing.T) {
	if !onFakeCUDA(t, "cuMemRelease:1:2") {
		return
	}
	b := fakeBackend(t)
	defer b.Close()
	fds := fakeExportedFDs(t)
	if _, err := b.prov.CreateSegment(1, b.gran); err == nil {
		t.Fatal("CreateSegment succeeded although releasing the handle failed")
	}
	if n := fakeExportedFDs(t) - fds; n != 0 {
		t.Errorf("a failed CreateSegment left %d exported fd(s) open", n)
	}
	c := fakeCUDACalls(t)
	if c["cuMemRelease FAILED"] != 1 || c["cuMemRelease"] != 0 {
		t.Errorf("cuMemRelease: %d failed, %d more: want the failed release alone (not retried)", c["cuMemRelease FAILED"], c["cuMemRelease"])
	}
	if c["cuMemUnmap"] != 1 || c["cuMemAddressFree"] != 1 {
		t.Errorf("after a failed CreateSegment %d unmap(s) and %d address free(s), want 1 each", c["cuMemUnmap"], c["cuMemAddressFree"])
	}

	setFakeCUDA(t, "cuMemExportToShareableHandle:0:2")
	if _, err := b.prov.CreateSegment(2, b.gran); err == nil {
		t.Fatal("CreateSegment succeeded although the export failed")
	}
	c = fakeCUDACalls(t)
	if c["cuMemRelease"] != 1 || c["cuMemUnmap"] != 2 {
		t.Errorf("after a failed export %d release(s) and %d unmap(s) in all, want 1 and 2", c["cuMemRelease"], c["cuMemUnmap"])
	}
	if n := b.prov.Len(); n != 0 {
		t.Errorf("the provider keeps %d segment(s) of failed creations", n)
	}
}

// TestFreeLocalKeepsOnWaitFailure: FreeLocal whose wait for the stream
// fails keeps the allocation: a later FreeLocal frees it, or Close does.
func TestFreeLocalKeepsOnWaitFailure(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	fds := fakeExportedFDs(t)
	p, err := b.AllocLocal(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.AllocLocal(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	setFakeCUDA(t, "cuStreamQuery:0:700") // the stream failed (an illegal address)
	if err := b.FreeLocal(p); err == nil || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("FreeLocal with the stream failing: %v, want an error saying the allocation is kept", err)
	}
	if err := b.FreeLocal(q); err == nil {
		t.Fatal("FreeLocal succeeded although the stream failed")
	}
	if n := fakeCUDACalls(t)["cuMemUnmap"]; n != 0 {
		t.Fatalf("a failed FreeLocal unmapped %d allocation(s)", n)
	}
	setFakeCUDA(t, "")
	if err := b.FreeLocal(p); err != nil {
		t.Errorf("FreeLocal again once the stream is idle: %v", err)
	}
	if err := b.Close(); err != nil { // releases q
		t.Errorf("Close: %v", err)
	}
	c := fakeCUDACalls(t)
	if d := c["cuMemAddressReserve"] - c["cuMemAddressFree"]; d != 0 {
		t.Errorf("%d local allocation(s) never unmapped (%v)", d, c)
	}
	if n := fakeExportedFDs(t) - fds; n != 0 {
		t.Errorf("%d fd(s) of local allocations still open", n)
	}
}

// newFakeGroup makes a one-rank group on b through NewGroup (setup on the
// fake driver: streams, events, a signal pad).
func newFakeGroup(t *testing.T, b *Backend, timeout time.Duration) *Group {
	t.Helper()
	bg, err := b.NewGroup(context.Background(), backend.GroupConfig{Name: "g", Ranks: []int{0}, Rank: 0, Store: testStore(t), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return bg.(*Group)
}

// TestGroupCloseReportsTeardown: Group.Close reports the driver's teardown
// failures and still tries every stream, event and mapping.
func TestGroupCloseReportsTeardown(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	defer b.Close()
	fds := fakeExportedFDs(t)
	g := newFakeGroup(t, b, time.Minute)
	setFakeCUDA(t, "cuStreamDestroy_v2:0:700,cuEventDestroy_v2:0:700,cuMemUnmap:0:700")
	err := g.Close()
	if err == nil {
		t.Fatal("Group.Close returned nil although every stream and event destroy and the pad's unmap failed")
	}
	c := fakeCUDACalls(t)
	if want := c["cuStreamCreate"] - 1; c["cuStreamDestroy_v2 FAILED"] != want { // the backend's stream stays
		t.Errorf("Close tried to destroy %d of the group's %d streams", c["cuStreamDestroy_v2 FAILED"], want)
	}
	if c["cuEventDestroy_v2 FAILED"] != c["cuEventCreate"] {
		t.Errorf("Close tried to destroy %d of the group's %d events", c["cuEventDestroy_v2 FAILED"], c["cuEventCreate"])
	}
	if c["cuMemUnmap FAILED"] == 0 || !strings.Contains(err.Error(), "cuMemUnmap") {
		t.Errorf("the pad's failed unmap is not reported: %v", err)
	}
	if n := fakeExportedFDs(t) - fds; n != 0 {
		t.Errorf("the pad's fd is still open (%d)", n)
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close again: %v, want nil (idempotent)", err)
	}
}

// TestBackendCloseReportsGroups: Backend.Close reports its groups' close
// errors. A group whose work never ended leaked its mappings; the backend
// then keeps what that work may use (segments, local memory, stream,
// context) too, also where the group was closed before (as World.Close
// does). Any other failure is reported and the teardown goes on.
func TestBackendCloseReportsGroups(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(fmt.Sprintf("in flight, group closed first %v", first), func(t *testing.T) {
			if !onFakeCUDA(t, "") {
				return
			}
			b := fakeBackend(t)
			g := newFakeGroup(t, b, time.Minute)
			g.Timeout = 200 * time.Millisecond // how long Close waits for the work
			if _, err := b.prov.CreateSegment(1, b.gran); err != nil {
				t.Fatal(err)
			}
			if _, err := b.AllocLocal(1); err != nil {
				t.Fatal(err)
			}
			g.runMu.Lock()
			g.st.usedOwn = true // a collective ran on the backend's stream
			g.runMu.Unlock()
			setFakeCUDA(t, neverDone)
			if first {
				if err := g.Close(); !errors.Is(err, errWorkInFlight) {
					t.Fatalf("Group.Close with its work in flight: %v, want errWorkInFlight", err)
				}
			}
			if err := b.Close(); !errors.Is(err, errWorkInFlight) {
				t.Fatalf("Backend.Close with a group's work in flight: %v, want errWorkInFlight", err)
			}
			c := fakeCUDACalls(t)
			for _, call := range []string{"cuMemUnmap", "cuStreamDestroy_v2", "cuEventDestroy_v2", "cuDevicePrimaryCtxRelease"} {
				if c[call] != 0 {
					t.Errorf("Backend.Close made %d %s under running work", c[call], call)
				}
			}
			if err := g.Close(); err != nil {
				t.Errorf("Group.Close again: %v, want nil (closed already)", err)
			}
		})
	}
	t.Run("teardown fails", func(t *testing.T) {
		if !onFakeCUDA(t, "") {
			return
		}
		b := fakeBackend(t)
		newFakeGroup(t, b, time.Minute)
		if _, err := b.prov.CreateSegment(1, b.gran); err != nil {
			t.Fatal(err)
		}
		setFakeCUDA(t, "cuStreamDestroy_v2:0:700")
		err := b.Close()
		if err == nil || errors.Is(err, errWorkInFlight) || !strings.Contains(err.Error(), `group "g"`) {
			t.Fatalf("Backend.Close with the group's stream destroys failing: %v, want the group's error", err)
		}
		c := fakeCUDACalls(t)
		if d := c["cuMemAddressReserve"] - c["cuMemAddressFree"]; d != 0 {
			t.Errorf("%d mapping(s) left after Backend.Close", d)
		}
		if c["cuDevicePrimaryCtxRelease"] != 1 {
			t.Errorf("the context was released %d times, want 1", c["cuDevicePrimaryCtxRelease"])
		}
	})
}

// TestNewGroupDuringClose: Close waits for a NewGroup in progress, whose
// group is then closed and refused, before it releases the context: not
// left open on a released one.
func TestNewGroupDuringClose(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	st := testStore(t)
	setFakeCUDA(t, "cuStreamCreate:0:-1") // the group's setup waits in its first stream
	made := make(chan error, 1)
	go func() {
		_, err := b.NewGroup(context.Background(), backend.GroupConfig{Name: "g", Ranks: []int{0}, Rank: 0, Store: st, Timeout: time.Minute})
		made <- err
	}()
	waitFakeCUDA(t, "cuStreamCreate BLOCKED")
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	for end := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		c := b.closed
		b.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(end) {
			t.Fatal("Close did not begin")
		}
	}
	setFakeCUDA(t, "") // the setup goes on
	for _, ch := range []struct {
		what string
		c    chan error
		want string // "" = nil
	}{{"NewGroup", made, "closed while"}, {"Close", closed, ""}} {
		select {
		case err := <-ch.c:
			if ch.want == "" && err != nil || ch.want != "" && (err == nil || !strings.Contains(err.Error(), ch.want)) {
				t.Errorf("%s: %v, want %q", ch.what, err, ch.want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not return", ch.what)
		}
	}
	c := fakeCUDACalls(t)
	if c["cuStreamCreate"] != c["cuStreamDestroy_v2"] || c["cuEventCreate"] != c["cuEventDestroy_v2"] || c["cuMemAddressReserve"] != c["cuMemAddressFree"] {
		t.Errorf("the group made during Close was not closed: %v", c)
	}
	if log := fakeCUDALog(t); log[len(log)-1] != "cuDevicePrimaryCtxRelease" {
		t.Errorf("the context was not released last: %v", log)
	}
}
