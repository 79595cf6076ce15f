package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestProviderBadSegmentRefused(t *testing.T) {
	p, prov := newTestPool(t, Options{})
	first := mustAlloc(t, p, 10, 1)
	seg1 := p.Segments()[0]
	tests := []struct {
		name string
		base func(uint64) uint64
		want string
	}{
		{"unaligned", func(b uint64) uint64 { return b + 256 }, "not aligned"},
		{"overlapping start", func(uint64) uint64 { return seg1.Base + 4096 }, "overlaps segment 1"},
		{"covering", func(uint64) uint64 { return seg1.Base - 4096 }, "overlaps segment 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, live := p.counts(), prov.nLive()
			prov.badBase = tc.base
			_, err := p.Alloc(100<<10, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Alloc: %v, want %q", err, tc.want)
			}
			if p.counts() != before || prov.nLive() != live {
				t.Fatal("state changed (or the bad segment was not released)")
			}
		})
	}
	if b := mustAlloc(t, p, 100<<10, 1); b.Seg != 2 {
		t.Fatalf("next segment id %d, want 2", b.Seg)
	}
	if err := p.Free(first.Addr, nil); err != nil {
		t.Fatal(err)
	}
}

// Divergence older than the kept log is still reported, without the entry.
func TestMismatchBeyondKeptLog(t *testing.T) {
	rs := newRanks(t, 2, Options{}, "world")
	errs := make([]error, 2)
	runRanks(2, func(r int) {
		p := rs[r].p
		s, _ := p.OpenScope(rs[r].gid[0])
		mustAlloc(t, p, 1000+int64(r), 1)
		for range 1500 {
			b := mustAlloc(t, p, 64, 1)
			p.Free(b.Addr, nil)
		}
		errs[r] = s.End(context.Background())
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "allocation logs differ before entry 1978 since the group's last check (only the last 1024 entries are kept)") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestMismatchInFree(t *testing.T) {
	rs := newRanks(t, 3, Options{}, "world")
	errs := make([]error, 3)
	runRanks(3, func(r int) {
		p := rs[r].p
		s, _ := p.OpenScope(rs[r].gid[0])
		a, b := mustAlloc(t, p, 1000, 1), mustAlloc(t, p, 1000, 1)
		if r == 2 {
			a = b
		}
		p.Free(a.Addr, nil)
		errs[r] = s.End(context.Background())
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "at entry 3 since the group's last check: rank 0 Free(seg1+0x0,1024 bytes), rank 2 Free(seg1+0x400,1024 bytes)") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// After a registration failed on one rank only, RemoveGroup refuses to
// deregister mismatching sets, and succeeds once they agree again.
func TestRemoveGroupVerifies(t *testing.T) {
	ctx := context.Background()
	rs := newRanks(t, 2, Options{}, "world")
	rs[1].m[0].failReg = 2
	errs := make([]error, 2)
	runRanks(2, func(r int) {
		p := rs[r].p
		s, _ := p.OpenScope(rs[r].gid[0])
		mustAlloc(t, p, 10, 1)
		mustAlloc(t, p, 100<<10, 1)
		if err := s.End(ctx); (err != nil) != (r == 1) {
			t.Errorf("rank %d End: %v", r, err)
		}
		errs[r] = p.RemoveGroup(ctx, rs[r].gid[0])
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 1 would deregister segments [1:64KiB] but rank 0 [1:64KiB 2:100KiB]; nothing was deregistered") {
			t.Fatalf("rank %d: %v", r, err)
		}
		if got := rs[r].m[0].calls_(); len(got) != 2-r {
			t.Fatalf("rank %d calls %v", r, got)
		}
	}
	// Only rank 1 has something new: it exchanges alone and the next
	// collective on rank 0 sees that the ranks are out of step.
	rs[1].m[0].failReg = 0
	s, _ := rs[1].p.OpenScope(rs[1].gid[0])
	runRanks(2, func(r int) {
		if r == 1 {
			errs[r] = s.End(ctx)
		} else {
			errs[r] = rs[r].p.RemoveGroup(ctx, rs[r].gid[0])
		}
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 1 is ending a scope but rank 0 is removing the group") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestTrimDeregisterFailureKeepsSegment(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{}, "world", "tp")[0]
	p := rk.p
	var bs []Block
	for _, gid := range rk.gid {
		s, _ := p.OpenScope(gid)
		bs = append(bs, mustAlloc(t, p, 100<<10, 1))
		if err := s.End(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bs {
		p.Free(b.Addr, nil)
	}
	rk.m[1].failDereg = 1
	err := p.Trim(ctx)
	if err == nil || !strings.Contains(err.Error(), "deregistering segment 1") {
		t.Fatalf("Trim: %v", err)
	}
	if n := len(p.Segments()); n != 2 || rk.prov.nLive() != 2 {
		t.Fatalf("%d segments left, want both", n)
	}
	checkInvariants(t, p)
	if b := mustAlloc(t, p, 100<<10, 1); b.Seg != 1 { // kept segments are usable
		t.Fatalf("alloc after failed trim: %+v", b)
	}
	rk.m[1].failDereg = 0
}

// Trim racing Alloc/Free/Lookup on other goroutines (one rank).
func TestTrimConcurrentWithAlloc(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{}, "world")[0]
	p := rk.p
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b, err := p.Alloc(int64(1+i%(150<<10)), 256)
				if err != nil {
					t.Error(err)
					return
				}
				if loc, ok := p.Lookup(b.Addr); !ok || loc.Block != b {
					t.Errorf("Lookup %+v %v", loc, ok)
				}
				if err := p.Free(b.Addr, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 200 {
		s, _ := p.OpenScope(rk.gid[0])
		if err := s.End(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.Trim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	checkInvariants(t, p)
	if err := p.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if c := p.counts(); c != (counts{Groups: 1}) || rk.m[0].nRegistered() != 0 {
		t.Fatalf("counts %+v, %d registered", c, rk.m[0].nRegistered())
	}
}

// Scopes of different groups end concurrently on every rank: each group's
// collective runs under its own lock, so neither waits for the other.
func TestConcurrentScopesOfDifferentGroups(t *testing.T) {
	ctx := context.Background()
	rs := newRanks(t, 2, Options{}, "world", "tp")
	runRanks(2, func(r int) {
		p := rs[r].p
		for range 3 {
			mustAlloc(t, p, 100<<10, 1)
		}
		var wg sync.WaitGroup
		for gi := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					s, err := p.OpenScope(rs[r].gid[gi])
					if err == nil {
						err = s.End(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	for r, rk := range rs {
		for gi, m := range rk.m {
			if got := m.calls_(); len(got) != 3 {
				t.Errorf("rank %d group %d calls %v", r, gi, got)
			}
		}
	}
}

// TestMismatchThenFreeRecovers: after a scope end that found different
// allocations, ranks that free what differed end scopes again (registering
// what was not registered); ranks that created different numbers of
// segments are told that no Free undoes it.
func TestMismatchThenFreeRecovers(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		rank1    int64 // rank 1's size where rank 0 allocates 1000
		recovers bool
	}{
		{"size", 2000, true},
		{"segment", 2 * propMinSeg, false}, // a segment rank 0 does not create
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := newRanks(t, 2, Options{MinSegment: propMinSeg}, "world")
			errs := make([]error, 2)
			runRanks(2, func(r int) {
				p := rs[r].p
				mustAlloc(t, p, 4096, 1) // segment 1 on every rank
				s, _ := p.OpenScope(rs[r].gid[0])
				size := int64(1000)
				if r == 1 {
					size = c.rank1
				}
				b := mustAlloc(t, p, size, 1)
				if err := s.End(ctx); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "nothing was registered") {
					errs[r] = fmt.Errorf("first End: %v, want ErrMismatch saying nothing was registered", err)
					return
				}
				if err := p.Free(b.Addr, nil); err != nil {
					errs[r] = err
					return
				}
				s, _ = p.OpenScope(rs[r].gid[0])
				mustAlloc(t, p, 4096, 1)
				errs[r] = s.End(ctx)
			})
			for r, err := range errs {
				switch {
				case c.recovers && err != nil:
					t.Errorf("rank %d: End after freeing what differed: %v", r, err)
				case !c.recovers && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "create it again")):
					t.Errorf("rank %d: End after freeing: %v, want ErrMismatch saying to create the world again", r, err)
				}
			}
			if c.recovers && rs[0].p.Stats().Groups[0].Registered != rs[1].p.Stats().Groups[0].Registered {
				t.Errorf("registered segments differ: %+v vs %+v", rs[0].p.Stats().Groups, rs[1].p.Stats().Groups)
			}
		})
	}
}
