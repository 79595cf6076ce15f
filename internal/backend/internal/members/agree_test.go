package members

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// agreements makes n HostAgreements in this process, joined through real fd
// exchanges (unix sockets passing memfds).
func agreements(t testing.TB, n int, timeout time.Duration) []*HostAgreement {
	t.Helper()
	tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
	ranks := make([]int, n)
	xs := make([]*rendezvous.FDExchange, n)
	for r := range n {
		ranks[r] = r
		x, err := rendezvous.NewFDExchange(rendezvous.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, Token: tok, JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Close)
		xs[r] = x
	}
	as := make([]*HostAgreement, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			as[r], errs[r] = NewHostAgreement(context.Background(), "test", xs[r], "agree-test", ranks, r, timeout)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		t.Cleanup(as[r].Close)
	}
	return as
}

// each runs f on every rank at once and returns the errors.
func each(as []*HostAgreement, f func(r int, a *HostAgreement) error) []error {
	errs := make([]error, len(as))
	var wg sync.WaitGroup
	for r, a := range as {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = f(r, a) }()
	}
	wg.Wait()
	return errs
}

// TestHostAgreement: equal records agree, many times in a row (both slots);
// a difference is the same Disagreement on every rank (lowest differing
// rank vs rank 0), after which the group agrees again; a rank that never
// comes is a timeout naming it.
func TestHostAgreement(t *testing.T) {
	as := agreements(t, 3, 300*time.Millisecond)
	same := agree.Record{1, 2, 3, 4, 5}
	for i := range 50 {
		rec := same
		rec[2] = uint64(i)
		for r, err := range each(as, func(_ int, a *HostAgreement) error { return a.Agree(context.Background(), rec) }) {
			if err != nil {
				t.Fatalf("agreement %d, rank %d: %v", i, r, err)
			}
		}
	}
	for r, err := range each(as, func(r int, a *HostAgreement) error {
		rec := same
		if r == 2 {
			rec[4] = 99
		}
		return a.Agree(context.Background(), rec)
	}) {
		var d *agree.Disagreement
		if !errors.As(err, &d) || d.Rank != 2 || d.Theirs[4] != 99 || d.Rank0 != same || !errors.Is(err, errs.Mismatch) {
			t.Fatalf("rank %d: %v, want rank 2's record against rank 0's", r, err)
		}
	}
	for r, err := range each(as, func(_ int, a *HostAgreement) error { return a.Agree(context.Background(), same) }) {
		if err != nil {
			t.Fatalf("after the difference, rank %d: %v", r, err)
		}
	}
	start := time.Now()
	for r, err := range each(as, func(r int, a *HostAgreement) error {
		if r == 1 {
			return nil // rank 1 is elsewhere
		}
		return a.Agree(context.Background(), same)
	}) {
		if r != 1 && (!errors.Is(err, rendezvous.ErrTimeout) || time.Since(start) > 5*time.Second) {
			t.Fatalf("rank %d with rank 1 absent: %v after %v, want a timeout naming rank 1", r, err, time.Since(start))
		}
	}
}

// BenchmarkHostAgreement: one agreement of 2 ranks (goroutines of this
// process, as the ranks of one host would be processes).
func BenchmarkHostAgreement(b *testing.B) {
	as := agreements(b, 2, 5*time.Second)
	rec := agree.Record{1, 2, 3, 4, 5}
	done := make(chan error)
	go func() {
		var err error
		for range b.N {
			if err = as[1].Agree(context.Background(), rec); err != nil {
				break
			}
		}
		done <- err
	}()
	b.ResetTimer()
	for range b.N {
		if err := as[0].Agree(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestAgreeLeftPeer: a rank that sets StateLeft (World.Close) while its
// peer waits in an agreement ends that wait at once with errs.PeerClosed
// naming it; the waiter's later agreements refuse (the sequence numbers no
// longer line up) and its state says failed. A closing rank does not count
// a peer's closing (Gone with leaving).
func TestAgreeLeftPeer(t *testing.T) {
	as := agreements(t, 2, 20*time.Second)
	go func() {
		time.Sleep(50 * time.Millisecond)
		as[1].SetState(StateLeft)
	}()
	start := time.Now()
	err := as[0].Agree(context.Background(), agree.Record{1})
	if took := time.Since(start); !errors.Is(err, errs.PeerClosed) || !strings.Contains(err.Error(), "rank 1") || took > time.Second {
		t.Fatalf("Agree with a peer that left: %v after %v, want errs.PeerClosed naming rank 1 within a second", err, took)
	}
	if err := as[0].Agree(context.Background(), agree.Record{2}); !errors.Is(err, errs.Broken) {
		t.Fatalf("Agree after a failed one: %v, want errs.Broken", err)
	}
	if err := as[1].Gone(0, false); !errors.Is(err, errs.Broken) {
		t.Fatalf("rank 0's state after its failed wait: %v, want errs.Broken", err)
	}
	if err := as[0].Gone(1, true); err != nil {
		t.Fatalf("a closing rank counts a closing peer as gone: %v", err)
	}
}
