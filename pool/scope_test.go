package pool

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// rank is one simulated rank: its own pool and provider, and its member of
// each group (all groups span all ranks).
type rank struct {
	p    *Pool
	prov *fakeProvider
	m    []*member
	gid  []GroupID
}

func newRanks(t testing.TB, n int, opts Options, groups ...string) []*rank {
	t.Helper()
	if opts.MinSegment == 0 {
		opts.MinSegment = 64 << 10
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	rs := make([]*rank, n)
	for r := range rs {
		prov := newProvider(r)
		p, err := New(prov, opts)
		if err != nil {
			t.Fatal(err)
		}
		rs[r] = &rank{p: p, prov: prov}
	}
	for _, name := range groups {
		ms := newGroup(name, n)
		for r, rk := range rs {
			id, err := rk.p.AddGroup(ms[r], 0)
			if err != nil {
				t.Fatal(err)
			}
			rk.m = append(rk.m, ms[r])
			rk.gid = append(rk.gid, id)
		}
	}
	return rs
}

func TestScopesRegisterNewSegmentsInOrder(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{}, "world", "tp")[0]
	p, world, tp := rk.p, rk.m[0], rk.m[1]
	outer, err := p.OpenScope(rk.gid[0])
	if err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, p, 1000, 1) // seg 1
	inner, _ := p.OpenScope(rk.gid[0])
	mustAlloc(t, p, 100<<10, 1) // seg 2
	other, _ := p.OpenScope(rk.gid[1])

	// Out of order: the outer scope while the inner one is open.
	before := p.counts()
	if err := outer.End(ctx); !errors.Is(err, ErrScopeOrder) {
		t.Fatalf("outer End first: %v", err)
	}
	if p.counts() != before || len(world.calls_()) != 0 {
		t.Fatal("out-of-order End changed state")
	}
	if err := inner.End(ctx); err != nil {
		t.Fatal(err)
	}
	if got := world.calls_(); !reflect.DeepEqual(got, []string{"R1", "R2"}) {
		t.Fatalf("world registrations %v", got)
	}
	mustAlloc(t, p, 200<<10, 1) // seg 3
	if err := outer.End(ctx); err != nil {
		t.Fatal(err)
	}
	if got := world.calls_(); !reflect.DeepEqual(got, []string{"R1", "R2", "R3"}) {
		t.Fatalf("world registrations %v", got)
	}
	if err := outer.End(ctx); !errors.Is(err, ErrScopeOrder) {
		t.Fatalf("End twice: %v", err)
	}
	// The tp scope, opened in between, is independent and registers all three.
	if err := other.End(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tp.calls_(); !reflect.DeepEqual(got, []string{"R1", "R2", "R3"}) {
		t.Fatalf("tp registrations %v", got)
	}
	// Nothing new: no exchange, no registration.
	calls := world.calls.Load()
	s, _ := p.OpenScope(rk.gid[0])
	if err := s.End(ctx); err != nil || world.calls.Load() != calls {
		t.Fatalf("empty End: %v, exchanges %d -> %d", err, calls, world.calls.Load())
	}
	// Disabled scope: no-op, but still only ends once.
	d := p.DisabledScope()
	mustAlloc(t, p, 300<<10, 1) // seg 4
	if err := d.End(ctx); err != nil || len(world.calls_()) != 3 {
		t.Fatalf("disabled End: %v %v", err, world.calls_())
	}
	if err := d.End(ctx); !errors.Is(err, ErrScopeOrder) {
		t.Fatalf("disabled End twice: %v", err)
	}
	st := p.Stats()
	if len(st.Groups) != 2 || st.Groups[0].Registered != 3 || st.Groups[1].Registered != 3 || st.Groups[0].RegisteredBytes != 364<<10 {
		t.Fatalf("stats %+v", st.Groups)
	}
	var want groupSet
	for _, id := range rk.gid {
		want |= 1 << id
	}
	if got := p.byID[1].groups; got != want {
		t.Fatalf("groups of segment 2: %b, want %b", got, want)
	}
}

func TestRemovedGroupAndClose(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{}, "world", "tp")[0]
	p := rk.p
	s, _ := p.OpenScope(rk.gid[1])
	a := mustAlloc(t, p, 1000, 1)
	if err := s.End(ctx); err != nil {
		t.Fatal(err)
	}
	open, _ := p.OpenScope(rk.gid[1])
	if err := p.RemoveGroup(ctx, rk.gid[1]); err != nil {
		t.Fatal(err)
	}
	if got := rk.m[1].calls_(); !reflect.DeepEqual(got, []string{"R1", "D1"}) {
		t.Fatalf("tp calls %v", got)
	}
	if _, _, ok := p.Symmetric(a.Addr, 1, rk.gid[1]); ok {
		t.Fatal("symmetric with a removed group")
	}
	for name, err := range map[string]error{
		"End after remove":       open.End(ctx),
		"OpenScope after remove": func() error { _, err := p.OpenScope(rk.gid[1]); return err }(),
		"RemoveGroup twice":      p.RemoveGroup(ctx, rk.gid[1]),
		"OpenScope of unknown":   func() error { _, err := p.OpenScope(40); return err }(),
		"OpenScope out of range": func() error { _, err := p.OpenScope(MaxGroups); return err }(),
	} {
		if !errors.Is(err, ErrGroupClosed) {
			t.Errorf("%s: %v, want ErrGroupClosed", name, err)
		}
	}
	// The id is reused lowest-first.
	if id, err := p.AddGroup(newGroup("tp2", 1)[0], 0); err != nil || id != rk.gid[1] {
		t.Fatalf("AddGroup after remove: %d %v", id, err)
	}
	s, _ = p.OpenScope(rk.gid[0])
	if err := s.End(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rk.m[0].calls_(); !reflect.DeepEqual(got, []string{"R1", "D1"}) {
		t.Fatalf("world calls %v", got)
	}
	if rk.prov.nLive() != 0 || p.counts() != (counts{}) {
		t.Fatalf("after Close: %d live segments, counts %+v", rk.prov.nLive(), p.counts())
	}
	for name, err := range map[string]error{
		"Alloc":       func() error { _, err := p.Alloc(1, 1); return err }(),
		"Free":        p.Free(a.Addr, nil),
		"Reserve":     p.Reserve(1),
		"AddGroup":    func() error { _, err := p.AddGroup(newGroup("x", 1)[0], 0); return err }(),
		"OpenScope":   func() error { _, err := p.OpenScope(0); return err }(),
		"Trim":        p.Trim(ctx),
		"RemoveGroup": p.RemoveGroup(ctx, 0),
		"Close":       p.Close(ctx),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestAddGroupBadInput(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	if _, err := p.AddGroup(nil, 0); err == nil {
		t.Fatal("nil group accepted")
	}
	bad := newGroup("bad", 2)[1]
	bad.rank = 5
	if _, err := p.AddGroup(bad, 0); err == nil || !strings.Contains(err.Error(), "rank 5 of size 2") {
		t.Fatalf("bad rank: %v", err)
	}
	for range MaxGroups {
		if _, err := p.AddGroup(newGroup("g", 1)[0], 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.AddGroup(newGroup("g", 1)[0], 0); err == nil || !strings.Contains(err.Error(), "remove one first") {
		t.Fatalf("group %d: %v", MaxGroups+1, err)
	}
}

func TestTrimReleasesOnlyFreeSegments(t *testing.T) {
	ctx := context.Background()
	rs := newRanks(t, 2, Options{}, "world", "tp")
	runRanks(2, func(r int) {
		rk := rs[r]
		p := rk.p
		s, _ := p.OpenScope(rk.gid[0])
		a := mustAlloc(t, p, 1000, 1)      // seg 1
		b := mustAlloc(t, p, 100<<10, 1)   // seg 2
		c := mustAlloc(t, p, 200<<10, 1)   // seg 3
		if err := s.End(ctx); err != nil { // world: 1 2 3
			t.Error(err)
			return
		}
		s, _ = p.OpenScope(rk.gid[1])
		if err := s.End(ctx); err != nil { // tp: 1 2 3
			t.Error(err)
			return
		}
		if err := p.Free(b.Addr, after(5)); err != nil {
			t.Error(err)
		}
		if err := p.Free(c.Addr, nil); err != nil {
			t.Error(err)
		}
		if err := p.Trim(ctx); err != nil { // releases 2 (after its fence) and 3
			t.Error(err)
			return
		}
		if err := p.Trim(ctx); err != nil { // nothing left to release
			t.Error(err)
			return
		}
		for i, m := range rk.m {
			if got := m.calls_(); !reflect.DeepEqual(got, []string{"R1", "R2", "R3", "D2", "D3"}) {
				t.Errorf("rank %d group %d calls %v", r, i, got)
			}
		}
		if segs := p.Segments(); len(segs) != 1 || segs[0].ID != 1 || rk.prov.nLive() != 1 {
			t.Errorf("rank %d segments %+v", r, segs)
		}
		if err := p.Free(a.Addr, nil); err != nil {
			t.Error(err)
		}
		if err := p.Trim(ctx); err != nil {
			t.Error(err)
		}
		if c := p.counts(); c != (counts{Groups: 2}) || rk.prov.nLive() != 0 {
			t.Errorf("rank %d after full trim: %+v", r, c)
		}
		// Segment ids continue after a trim.
		if b := mustAlloc(t, p, 10, 1); b.Seg != 4 {
			t.Errorf("rank %d: new segment id %d, want 4", r, b.Seg)
		}
	})
}

func TestMismatchNamesRankAndEntry(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		do   func(t *testing.T, r int, p *Pool) // before the End that registers
		want string
	}{
		{"one byte more", func(t *testing.T, r int, p *Pool) {
			mustAlloc(t, p, 4096, 256)
			mustAlloc(t, p, 4096+int64(r), 256)
		}, "allocation log differs at entry 2 since the group's last check: rank 0 Alloc(4096,256)=seg1+0x1000, rank 1 Alloc(4097,256)=seg1+0x1000"},
		{"other order", func(t *testing.T, r int, p *Pool) {
			sizes := []int64{4096, 512}
			mustAlloc(t, p, sizes[r], 1)
			mustAlloc(t, p, sizes[1-r], 1)
		}, "entry 1 since the group's last check: rank 0 Alloc(4096,1)=seg1+0x0, rank 1 Alloc(512,1)=seg1+0x0"},
		{"extra segment", func(t *testing.T, r int, p *Pool) {
			mustAlloc(t, p, 10, 1)
			if r == 1 {
				p.Reserve(2 << 20)
			}
		}, "rank 1 would register segments [1:64KiB 2:2MiB] but rank 0 [1:64KiB]"},
		{"extra call", func(t *testing.T, r int, p *Pool) {
			mustAlloc(t, p, 10, 1)
			if r == 0 {
				mustAlloc(t, p, 20, 1)
			}
		}, "rank 1 made 1 Alloc/Free calls since the group's last check but rank 0 made 2 (rank 0's entry 2: Alloc(20,1)=seg1+0x100)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRanks(t, 2, Options{}, "world")
			errs := make([]error, 2)
			runRanks(2, func(r int) {
				s, _ := rs[r].p.OpenScope(rs[r].gid[0])
				tc.do(t, r, rs[r].p)
				errs[r] = s.End(ctx)
			})
			t.Logf("rank 0: %v", errs[0])
			for r, err := range errs {
				if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("rank %d: %v\nwant ErrMismatch containing %q", r, err, tc.want)
				}
				if n := rs[r].m[0].registers(); n != 0 {
					t.Errorf("rank %d registered %d segments despite the mismatch", r, n)
				}
			}
			if errs[0] != nil && errs[1] != nil && errs[0].Error() != errs[1].Error() {
				t.Errorf("ranks report differently:\n%v\n%v", errs[0], errs[1])
			}
		})
	}
}

func TestExchangeTimesOutNamingMissingRank(t *testing.T) {
	rs := newRanks(t, 2, Options{Timeout: 100 * time.Millisecond}, "world")
	s, _ := rs[0].p.OpenScope(rs[0].gid[0])
	mustAlloc(t, rs[0].p, 10, 1)
	start := time.Now()
	err := s.End(context.Background()) // rank 1 never comes
	if err == nil || !strings.Contains(err.Error(), "ranks [1] did not arrive") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("End without peers: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timed out after %v, want about 100ms", d)
	}
	if rs[0].m[0].registers() != 0 {
		t.Fatal("registered after a failed exchange")
	}
}

func TestRegisterFailureIsReported(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{}, "world")[0]
	rk.m[0].failReg = 2
	s, _ := rk.p.OpenScope(rk.gid[0])
	mustAlloc(t, rk.p, 10, 1)
	mustAlloc(t, rk.p, 100<<10, 1)
	mustAlloc(t, rk.p, 100<<10, 1)
	err := s.End(ctx)
	if err == nil || !strings.Contains(err.Error(), "registering segment 2") || !strings.Contains(err.Error(), "1 earlier segment(s) of this scope are registered, this one and 1 later are not") {
		t.Fatalf("End: %v", err)
	}
	rk.m[0].failReg = 0
	s, _ = rk.p.OpenScope(rk.gid[0])
	if err := s.End(ctx); err != nil { // retries from the cursor
		t.Fatal(err)
	}
	if got := rk.m[0].calls_(); !reflect.DeepEqual(got, []string{"R1", "R2", "R3"}) {
		t.Fatalf("calls %v", got)
	}
}

func TestConcurrentAllocFreeLookup(t *testing.T) {
	ctx := context.Background()
	rk := newRanks(t, 1, Options{MinSegment: 256 << 10}, "world")[0]
	p := rk.p
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var live []Block
			for i := range 2000 {
				switch {
				case i%7 == 3 && len(live) > 0:
					b := live[0]
					live = live[1:]
					if err := p.Free(b.Addr, nil); err != nil {
						t.Error(err)
						return
					}
				case i%50 == 0 && w == 0:
					s, err := p.OpenScope(rk.gid[0])
					if err == nil {
						err = s.End(ctx)
					}
					if err != nil {
						t.Error(err)
						return
					}
				default:
					b, err := p.Alloc(int64(1+i%3000), 1<<(i%5))
					if err != nil {
						t.Error(err)
						return
					}
					live = append(live, b)
				}
				for _, b := range live[max(0, len(live)-3):] {
					if loc, ok := p.Lookup(b.Addr + 1); !ok || loc.Block != b {
						t.Errorf("Lookup(%#x) = %+v %v, want %+v", b.Addr+1, loc, ok, b)
						return
					}
				}
			}
			for _, b := range live {
				if err := p.Free(b.Addr, nil); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if st := p.Stats(); st.InUse != 0 || st.LiveBlocks != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := p.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if c := p.counts(); c != (counts{Groups: 1}) {
		t.Fatalf("counts %+v", c)
	}
}

// TestDropGroup: a group that never registered a segment is removed on this
// rank alone (its id is free again, its scopes end with ErrGroupClosed);
// one with registrations is refused (RemoveGroup, together).
func TestDropGroup(t *testing.T) {
	ctx := context.Background()
	p, _ := newTestPool(t, Options{})
	id, err := p.AddGroup(newGroup("g", 1)[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := p.OpenScope(id)
	if err := p.DropGroup(id); err != nil {
		t.Fatal(err)
	}
	if err := sc.End(ctx); !errors.Is(err, ErrGroupClosed) {
		t.Errorf("a dropped group's scope ended with %v, want ErrGroupClosed", err)
	}
	if err := p.DropGroup(id); !errors.Is(err, ErrGroupClosed) {
		t.Errorf("dropped twice: %v, want ErrGroupClosed", err)
	}
	again, err := p.AddGroup(newGroup("h", 1)[0], 0)
	if err != nil || again != id {
		t.Fatalf("the id after DropGroup: %d, %v; want %d", again, err, id)
	}
	sc, _ = p.OpenScope(again)
	mustAlloc(t, p, 1000, 1)
	if err := sc.End(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.DropGroup(again); err == nil || !strings.Contains(err.Error(), "RemoveGroup") {
		t.Errorf("a group with registrations dropped alone: %v", err)
	}
}

// TestMismatchAfterMendNamesWhatStillDiffers: after a Scope.End that found
// different allocations, the next one names the live blocks that still
// differ, not the Free calls the ranks made to mend the first difference
// (their sizes differ too: the log since the failed check starts there).
func TestMismatchAfterMendNamesWhatStillDiffers(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		mend func(r int, p *Pool, first Block) // between the two Ends
		want string
	}{
		{"one of two differences freed", func(r int, p *Pool, first Block) {
			if err := p.Free(first.Addr, nil); err != nil {
				t.Error(err)
			}
		}, "first differing live block: rank 0 Alloc(512,1)=seg1+0x1000, rank 1 Alloc(768,1)=seg1+0x2000"},
		{"freed on one rank only", func(r int, p *Pool, first Block) {
			if r == 1 {
				if err := p.Free(first.Addr, nil); err != nil {
					t.Error(err)
				}
			}
		}, "first differing live block: rank 0 Alloc(4096,1)=seg1+0x0, rank 1 Alloc(768,1)=seg1+0x2000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRanks(t, 2, Options{}, "world")
			errs := make([]error, 2)
			runRanks(2, func(r int) {
				p := rs[r].p
				s, _ := p.OpenScope(rs[r].gid[0])
				first := mustAlloc(t, p, 4096*int64(1+r), 1)
				mustAlloc(t, p, 512+256*int64(r), 1)
				if err := s.End(ctx); !errors.Is(err, ErrMismatch) {
					t.Errorf("rank %d: first End: %v, want ErrMismatch", r, err)
				}
				tc.mend(r, p, first)
				s, _ = p.OpenScope(rs[r].gid[0])
				errs[r] = s.End(ctx)
			})
			t.Logf("rank 0: %v", errs[0])
			for r, err := range errs {
				if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Free(") {
					t.Errorf("rank %d: %v\nwant ErrMismatch containing %q and naming no Free", r, err, tc.want)
				}
			}
			if errs[0] != nil && errs[1] != nil && errs[0].Error() != errs[1].Error() {
				t.Errorf("ranks report differently:\n%v\n%v", errs[0], errs[1])
			}
		})
	}
}
