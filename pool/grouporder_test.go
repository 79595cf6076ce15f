package pool

import (
	"context"
	"testing"
	"time"
)

// TestTrimGroupOrder: group ids are assigned per rank, lowest free first,
// and a group of some ranks only (here one of rank 0 alone) shifts them:
// after it is removed its id goes to a later group on those ranks only.
// Trim (and Close) go over the groups in AddGroup's order, alike on every
// rank; in id order the two ranks took x and y in opposite orders and both
// waited out the timeout though they made the same calls (found by
// review).
func TestTrimGroupOrder(t *testing.T) {
	ctx := context.Background()
	opts := Options{MinSegment: 64 << 10, Timeout: 2 * time.Second}
	x, y := newGroup("x", 2), newGroup("y", 2)
	solo := newGroup("solo", 1)
	pools := make([]*Pool, 2)
	ids := make([][2]GroupID, 2) // x, y
	for r := range 2 {
		p, err := New(newProvider(r), opts)
		if err != nil {
			t.Fatal(err)
		}
		pools[r] = p
		if r == 0 { // rank 0 is the only member of "solo", created first
			if _, err := p.AddGroup(solo[0], 1); err != nil {
				t.Fatal(err)
			}
		}
		if ids[r][0], err = p.AddGroup(x[r], 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := pools[0].RemoveGroup(ctx, 0); err != nil { // solo (id 0) goes
		t.Fatal(err)
	}
	for r := range 2 {
		var err error
		if ids[r][1], err = pools[r].AddGroup(y[r], 3); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("rank 0 ids x=%d y=%d; rank 1 ids x=%d y=%d", ids[0][0], ids[0][1], ids[1][0], ids[1][1])
	// Same calls on every rank: allocate, register with x and y, free, trim.
	errs := make([]error, 2)
	runRanks(2, func(r int) {
		p := pools[r]
		b, err := p.Alloc(1000, 1)
		if err != nil {
			errs[r] = err
			return
		}
		for _, id := range []GroupID{ids[r][0], ids[r][1]} { // x then y, on every rank
			s, err := p.OpenScope(id)
			if err == nil {
				err = s.End(ctx)
			}
			if err != nil {
				errs[r] = err
				return
			}
		}
		if err := p.Free(b.Addr, nil); err != nil {
			errs[r] = err
			return
		}
		start := time.Now()
		errs[r] = p.Trim(ctx)
		t.Logf("rank %d: Trim took %v: %v", r, time.Since(start).Round(time.Millisecond), errs[r])
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: identical calls on every rank, yet: %v", r, err)
		}
	}
}
