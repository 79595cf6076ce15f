package shm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
)

// TestBroadcastNonRootCancelBreaks: a broadcast's non-root rank signals
// every peer in the in-band agreement phase, then waits for the root's
// phase 0. When that wait ends (ctx cancelled, deadline, timeout) the group
// breaks: the root may be mid-call. Before, the agreement phase did not
// count as signalled: the non-root's next identical call failed with a
// bogus argument disagreement instead of errs.Broken, and the root's
// broadcast "succeeded" without the non-root having copied anything (found
// by review).
func TestBroadcastNonRootCancelBreaks(t *testing.T) {
	const n, count = 2, 1024
	lg := newLocalGroup(t, n, 1<<20, split{workers: 1})
	for _, g := range lg.gs {
		g.Timeout = 2 * time.Second
	}
	const sid = pool.SegmentID(7)
	for _, g := range lg.gs {
		g.segs.Add(sid, lg.out)
	}
	req := func(r int) backend.Request {
		out := coll.Span{Ptr: hostmem.Addr(lg.outMem[r]), Len: count * 4}
		q := backend.Request{Kind: coll.Broadcast, DType: coll.Float32, Root: 0, Count: count,
			Out: out, OutSym: backend.Sym{OK: true, Seg: sid}}.Shaped(n, r)
		q.Record = agree.CallRecord(coll.Broadcast, coll.Float32, 0, 0, count, 0, 0, agree.Loc(uint64(sid), 0))
		return q
	}
	run := func(r int, ctx context.Context) error {
		_, err := lg.gs[r].Run(ctx, req(r))
		return err
	}
	// Call 1: both ranks, fine.
	errc := make(chan error, 1)
	go func() { errc <- run(0, context.Background()) }()
	if err := run(1, context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	// Call 2: the root runs Run's steps as Run does, but is descheduled
	// for 300 ms between the agreement phase (check) and the plan's
	// phase-0 signal (execute); the non-root's ctx ends in that gap.
	rootDone := make(chan error, 1)
	go func() {
		g := lg.gs[0]
		rq := req(0)
		g.runMu.Lock()
		defer g.runMu.Unlock()
		p, err := g.planFor(rq)
		if err != nil {
			rootDone <- err
			return
		}
		x, err := g.prepare(rq, p)
		if err != nil {
			rootDone <- err
			return
		}
		x.ctx, x.deadline = context.Background(), time.Now().Add(g.Timeout)
		if err := g.check(rq, p, x); err != nil {
			rootDone <- err
			return
		}
		time.Sleep(300 * time.Millisecond) // preempted here
		if err := g.execute(x); err != nil {
			rootDone <- err
			return
		}
		g.epoch += uint32(p.Phases)
		rootDone <- nil
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := run(1, ctx)
	cancel()
	if err == nil {
		t.Fatal("non-root's call 2 succeeded before the root arrived")
	}
	t.Logf("rank 1 call 2: %v", err)
	time.Sleep(400 * time.Millisecond) // the root is now in call 2, waiting for rank 1's phase 1

	// Rank 1 failed midway (it signalled the agreement phase, the root is
	// mid-call): its next call must fail with errs.Broken.
	err3 := run(1, context.Background())
	t.Logf("rank 1 call 3 (same arguments): %v", err3)
	var d *agree.Disagreement
	if errors.As(err3, &d) {
		t.Errorf("rank 1's call 3 with identical arguments reports an argument disagreement instead of errs.Broken: %v", err3)
	} else if !errors.Is(err3, errs.Broken) {
		t.Errorf("rank 1's call 3: %v, want errs.Broken", err3)
	}
	// The root's call 2 ends with an error too (rank 1 broke the group and
	// said so), before the test's cleanup unmaps what it uses.
	select {
	case err := <-rootDone:
		if err == nil {
			t.Errorf("root's call 2 returned success although rank 1's call 2 failed and rank 1 never read the root's data")
		} else {
			t.Logf("root call 2: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("root's call 2 still blocked 30 s after rank 1 broke the group")
	}
}
