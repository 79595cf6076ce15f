package members

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

func gates(as []*HostAgreement) []*CallGate {
	gs := make([]*CallGate, len(as))
	for r, a := range as {
		gs[r] = a.Gate()
	}
	return gs
}

func entry(i int, gated bool) GateEntry {
	return GateEntry{Record: agree.Record{agree.RecCall << 56, 0, uint64(i)}, Path: 4, Gated: gated}
}

// TestCallGate: ranks that publish the same calls see them approved in
// order, past the ring's length, whichever rank arrives last; calls that
// differ on symmem's kernels everywhere (no rank gated) are approved (the
// kernels' check reports them); a difference on a gated call stops the
// approval there and is the same GateMismatch on every rank, after which
// no rank publishes.
func TestCallGate(t *testing.T) {
	const n = 3
	gs := gates(agreements(t, n, 2*time.Second))
	ctx := context.Background()
	calls := 3*gateRing + 7
	for r, err := range eachGate(gs, func(r int, g *CallGate) error {
		for i := 1; i <= calls; i++ {
			e := entry(i, i%5 == 0) // every fifth call waits on the GPU
			if i == 101 && r == 1 {
				e.Record[2] = 999 // kernels everywhere: left to the in-band check
			}
			k, err := g.Publish(ctx, e)
			if err != nil {
				return fmt.Errorf("call %d: %w", i, err)
			}
			if k != uint64(i) {
				return fmt.Errorf("call %d numbered %d", i, k)
			}
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// The last gated call was published by all: approved at least that far.
	last := uint64(calls - calls%5)
	if a := gs[0].Approved(); a < last {
		t.Fatalf("approved %d after every rank published %d (last gated %d)", a, calls, last)
	}

	// A gated call that differs: rank 2 passes another count.
	k0 := gs[0].Published() + 1
	start := time.Now()
	res := eachGate(gs, func(r int, g *CallGate) error {
		e := entry(7, true)
		if r == 2 {
			e.Record[2] = 8
		}
		_, err := g.Publish(ctx, e)
		return err
	})
	var seen *GateMismatch
	for r := range gs {
		m := gs[r].Failed()
		if m == nil || m.Call != k0 || m.Rank != 2 || m.Theirs.Record[2] != 8 || m.Rank0.Record[2] != 7 || !errors.Is(m, errs.Mismatch) {
			t.Fatalf("rank %d: Failed() = %v (Publish: %v), want call %d, rank 2's count 8 against 7", r, m, res[r], k0)
		}
		seen = m
	}
	if a := gs[0].Approved(); a >= k0 {
		t.Fatalf("approved %d: the call that differs (%d) must not be approved", a, k0)
	}
	var last0 error
	for _, err := range res {
		if err != nil {
			last0 = err
		}
	}
	if last0 == nil {
		t.Fatalf("no rank's Publish reported the difference (the last to publish compares)")
	}
	t.Logf("found in %v: %v", time.Since(start), seen)
	for r, g := range gs {
		if _, err := g.Publish(ctx, entry(1, false)); !errors.As(err, &seen) {
			t.Fatalf("rank %d published after the difference: %v", r, err)
		}
	}
}

// TestCallGateAhead: a rank gateRing calls ahead of a peer waits for it
// (then goes on once it publishes), and one whose peer never comes gets a
// timeout naming it.
func TestCallGateAhead(t *testing.T) {
	gs := gates(agreements(t, 2, 300*time.Millisecond))
	ctx := context.Background()
	for i := 1; i <= gateRing; i++ {
		if _, err := gs[0].Publish(ctx, entry(i, false)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	done := make(chan error)
	go func() { _, err := gs[0].Publish(ctx, entry(gateRing+1, false)); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a rank %d calls ahead published without waiting: %v", gateRing, err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := gs[1].Publish(ctx, entry(1, false)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the peer caught up: %v", err)
	}
	_, err := gs[0].Publish(ctx, entry(gateRing+2, false))
	if !errors.Is(err, rendezvous.ErrTimeout) || !errorsContains(err, "rank 1") {
		t.Fatalf("peer a ring behind for good: %v, want a timeout naming rank 1", err)
	}
}

// TestCallGateWake: Sleep returns at once when a difference is found (a
// wake since its last return), and sleeps the time given otherwise.
func TestCallGateWake(t *testing.T) {
	gs := gates(agreements(t, 2, time.Second))
	ctx := context.Background()
	start := time.Now()
	gs[1].Sleep(30 * time.Millisecond)
	if el := time.Since(start); el < 25*time.Millisecond {
		t.Fatalf("Sleep(30ms) returned after %v with nothing to wake it", el)
	}
	woke := make(chan time.Duration)
	go func() {
		s := time.Now()
		gs[1].Sleep(10 * time.Second)
		woke <- time.Since(s)
	}()
	time.Sleep(20 * time.Millisecond)
	gs[0].Publish(ctx, entry(1, true))
	e := entry(2, true)
	gs[1].Publish(ctx, e) // differs from rank 0's call 1: found, watchers woken
	select {
	case el := <-woke:
		t.Logf("woken after %v", el)
	case <-time.After(5 * time.Second):
		t.Fatal("Sleep was not woken by the difference")
	}
	if gs[0].Failed() == nil {
		t.Fatal("no difference recorded")
	}
}

func eachGate(gs []*CallGate, f func(r int, g *CallGate) error) []error {
	as := make([]*HostAgreement, len(gs))
	for r, g := range gs {
		as[r] = g.a
	}
	return each(as, func(r int, _ *HostAgreement) error { return f(r, gs[r]) })
}

func errorsContains(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}

// BenchmarkCallGate: rank 0's Publish (ns/op) with a peer that publishes
// the same calls in turns of half a ring before it (goroutines of this
// process, as processes of one host would be; turns, so the peer does not
// spin on the lines being timed): every call on symmem's kernels (no rank
// waits for approval: the gate compares half a ring at a time), and every
// call gated (each publish tries to approve).
func BenchmarkCallGate(b *testing.B) {
	for _, gated := range []bool{false, true} {
		b.Run(map[bool]string{false: "kernels", true: "gated"}[gated], func(b *testing.B) {
			gs := gates(agreements(b, 2, 5*time.Second))
			ctx := context.Background()
			const turn = gateRing / 2
			var timed time.Duration
			for i := 0; i < b.N; i += turn {
				m := min(turn, b.N-i)
				for j := range m {
					if _, err := gs[1].Publish(ctx, entry(i+j, gated)); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				for j := range m {
					if _, err := gs[0].Publish(ctx, entry(i+j, gated)); err != nil {
						b.Fatal(err)
					}
				}
				timed += time.Since(start)
			}
			b.ReportMetric(float64(timed.Nanoseconds())/float64(b.N), "ns/publish")
		})
	}
}

// TestCallGatePublishAllocs: publishing allocates nothing (it runs on
// every collective), gated or not.
func TestCallGatePublishAllocs(t *testing.T) {
	gs := gates(agreements(t, 2, time.Second))
	ctx := context.Background()
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		i++
		for _, g := range gs {
			if _, err := g.Publish(ctx, entry(i, i%2 == 0)); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}
