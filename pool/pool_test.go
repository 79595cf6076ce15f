package pool

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/wait"
)

type badGranProvider struct{ fakeProvider }

func (*badGranProvider) Granularity() int64 { return 3000 }

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		prov Provider
		opts Options
		want string
	}{
		{"nil provider", nil, Options{}, "provider is nil"},
		{"granularity not power of two", &badGranProvider{}, Options{}, "power of two"},
		{"negative min segment", newProvider(0), Options{MinSegment: -1}, "negative"},
		{"negative cap", newProvider(0), Options{Cap: -1}, "negative"},
		{"negative timeout", newProvider(0), Options{Timeout: -time.Second}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.prov, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want error containing %q", err, tc.want)
			}
			// A user's option (Options.Pool) is a bad argument: Init and
			// the C ABI say ErrInvalid (it wrapped nothing: INTERNAL).
			if tc.want == "negative" && !errors.Is(err, errs.Invalid) {
				t.Fatalf("New: %v does not wrap errs.Invalid", err)
			}
		})
	}
	p, err := New(newProvider(0), Options{MinSegment: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if o := p.opts; o.MinSegment != 4096 || o.Timeout != wait.DefaultTimeout {
		t.Fatalf("defaults: %+v", o)
	}
}

func TestAllocBadInputLeavesStateUnchanged(t *testing.T) {
	p, _ := newTestPool(t, Options{Cap: 128 << 10})
	keep := mustAlloc(t, p, 1000, 1)
	before, beforeStats := p.counts(), p.Stats()
	tests := []struct {
		name        string
		size, align int64
		want        error
	}{
		{"zero size", 0, 1, ErrInvalidSize},
		{"negative size", -5, 1, ErrInvalidSize},
		{"huge size", MaxAlloc + 1, 1, ErrInvalidSize},
		{"zero align", 64, 0, ErrInvalidAlignment},
		{"align 3", 64, 3, ErrInvalidAlignment},
		{"negative align", 64, -8, ErrInvalidAlignment},
		{"align above granularity", 64, 8192, ErrInvalidAlignment},
		{"above cap", 200 << 10, 1, ErrCapExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Alloc(tc.size, tc.align)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Alloc(%d, %d) = %v, want %v", tc.size, tc.align, err, tc.want)
			}
			if p.counts() != before || !reflect.DeepEqual(p.Stats(), beforeStats) {
				t.Fatalf("state changed: %+v -> %+v", before, p.counts())
			}
		})
	}
	if err := p.Free(keep.Addr, nil); err != nil {
		t.Fatal(err)
	}
}

func TestBestFitSplitCoalesce(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	type want struct {
		seg  SegmentID
		off  int64
		size int64
	}
	a := mustAlloc(t, p, 1000, 1)    // [0,1024)
	b := mustAlloc(t, p, 4096, 4096) // [4096,8192): leaves [1024,4096) free
	c := mustAlloc(t, p, 2048, 1)    // best fit: the 3 KiB hole, not the tail
	d := mustAlloc(t, p, 100<<10, 1) // bigger than MinSegment: own segment
	got := []want{{a.Seg, a.Off, a.Size}, {b.Seg, b.Off, b.Size}, {c.Seg, c.Off, c.Size}, {d.Seg, d.Off, d.Size}}
	exp := []want{{1, 0, 1024}, {1, 4096, 4096}, {1, 1024, 2048}, {2, 0, 100 << 10}}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("blocks %v, want %v", got, exp)
	}
	if segs := p.Segments(); len(segs) != 2 || segs[0].Size != 64<<10 || segs[1].Size != 100<<10 {
		t.Fatalf("segments %+v", segs)
	}
	for _, x := range []Block{a, c} {
		if err := p.Free(x.Addr, nil); err != nil {
			t.Fatal(err)
		}
	}
	// a and c coalesced with the hole into [0,4096): an exact fit.
	if e := mustAlloc(t, p, 4096, 1); e.Seg != 1 || e.Off != 0 {
		t.Fatalf("after coalesce got seg %d off %d, want 1/0", e.Seg, e.Off)
	}
	if n := len(p.byID[0].blocks); n != 3 { // [0,4K) live, [4K,8K) live, tail free
		t.Fatalf("segment 1 has %d blocks, want 3", n)
	}
	st := p.Stats()
	if st.InUse != 8192+100<<10 || st.Peak != 8192+100<<10 || st.Reserved != 164<<10 || st.LiveBlocks != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFreeBadInput(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	a := mustAlloc(t, p, 4096, 1)
	b := mustAlloc(t, p, 4096, 1)
	if err := p.Free(b.Addr, after(2)); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a.Addr, nil); err != nil {
		t.Fatal(err)
	}
	c := mustAlloc(t, p, 8192, 1) // a and b's space: waits for b's fence
	before := p.counts()
	tests := []struct {
		name string
		addr uint64
		want error
	}{
		{"never allocated (below the pool)", 12, ErrNotAllocated},
		{"past every segment", 1 << 62, ErrNotAllocated},
		{"inside a block", c.Addr + 256, ErrNotAllocated},
		{"freed with a fence, now inside c", b.Addr, ErrNotAllocated},
		{"free space", c.Addr + uint64(c.Size) + 4096, ErrDoubleFree},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Free(tc.addr, nil); !errors.Is(err, tc.want) {
				t.Fatalf("Free(%#x) = %v, want %v", tc.addr, err, tc.want)
			}
			if p.counts() != before {
				t.Fatal("state changed")
			}
		})
	}
	if err := p.Free(c.Addr, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(c.Addr, nil); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("second Free = %v, want ErrDoubleFree", err)
	}
}

// A fenced free must not change placement (that would break symmetry across
// ranks whose fences complete at different times); the Alloc that reuses the
// range waits for the fence instead.
func TestFenceGuardsReuse(t *testing.T) {
	p, _ := newTestPool(t, Options{Timeout: 2 * time.Second})
	a := mustAlloc(t, p, 4096, 1)
	f := &fence{}
	if err := p.Free(a.Addr, f); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Pending != 4096 || st.InUse != 0 {
		t.Fatalf("stats %+v", st)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		f.done.Store(true)
	}()
	start := time.Now()
	b := mustAlloc(t, p, 4096, 1)
	if b.Off != a.Off {
		t.Fatalf("fenced free changed placement: got off %d, want %d", b.Off, a.Off)
	}
	if !f.done.Load() || time.Since(start) < 20*time.Millisecond {
		t.Fatal("Alloc handed out a range whose fence was not done")
	}
	if st := p.Stats(); st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFenceTimeoutLeavesStateUnchanged(t *testing.T) {
	p, _ := newTestPool(t, Options{Timeout: 50 * time.Millisecond})
	a := mustAlloc(t, p, 4096, 1)
	f := &fence{}
	if err := p.Free(a.Addr, f); err != nil {
		t.Fatal(err)
	}
	before := p.counts()
	if _, err := p.Alloc(4096, 1); err == nil || !strings.Contains(err.Error(), "did not complete") {
		t.Fatalf("Alloc over a stuck fence = %v, want a fence timeout", err)
	}
	if after := p.counts(); after != before {
		t.Fatalf("state changed: %+v -> %+v", before, after)
	}
	f.done.Store(true)
	if b := mustAlloc(t, p, 4096, 1); b.Off != a.Off {
		t.Fatalf("got off %d, want %d", b.Off, a.Off)
	}
	done := &fence{}
	done.done.Store(true)
	if err := p.Free(a.Addr, done); err != nil { // a done fence is not tracked
		t.Fatal(err)
	}
	if st := p.Stats(); st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCap(t *testing.T) {
	p, _ := newTestPool(t, Options{Cap: 100 << 10}) // MinSegment 64 KiB
	mustAlloc(t, p, 60<<10, 1)
	// A new 64 KiB segment would exceed the cap; it shrinks to the 36 KiB left.
	b := mustAlloc(t, p, 20<<10, 1)
	if b.Seg != 2 || p.Segments()[1].Size != 36<<10 {
		t.Fatalf("segments %+v", p.Segments())
	}
	before := p.counts()
	if _, err := p.Alloc(20<<10, 1); !errors.Is(err, ErrCapExceeded) {
		t.Fatalf("Alloc over the cap: %v", err)
	}
	if err := p.Reserve(1); !errors.Is(err, ErrCapExceeded) {
		t.Fatalf("Reserve over the cap: %v", err)
	}
	if p.counts() != before {
		t.Fatal("state changed")
	}
	if err := p.Reserve(0); !errors.Is(err, ErrInvalidSize) {
		t.Fatalf("Reserve(0): %v", err)
	}
}

func TestReserveAndProviderFailure(t *testing.T) {
	p, prov := newTestPool(t, Options{})
	if err := p.Reserve(1 << 20); err != nil {
		t.Fatal(err)
	}
	if b := mustAlloc(t, p, 200<<10, 1); b.Seg != 1 {
		t.Fatalf("allocation did not use the reserved segment: %+v", b)
	}
	prov.failNew = true
	before := p.counts()
	if _, err := p.Alloc(2<<20, 1); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("Alloc with a failing provider: %v", err)
	}
	if p.counts() != before {
		t.Fatal("state changed")
	}
	prov.failNew = false
	if b := mustAlloc(t, p, 2<<20, 1); b.Seg != 2 {
		t.Fatalf("segment id skipped after a failure: %+v", b)
	}
}

func TestLookupAndSymmetric(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	g := newGroup("world", 1)[0]
	gid, err := p.AddGroup(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := p.OpenScope(gid)
	a := mustAlloc(t, p, 4096, 1)
	b := mustAlloc(t, p, 8192, 1)
	if _, _, ok := p.Symmetric(a.Addr, 16, gid); ok {
		t.Fatal("symmetric before the scope registered the segment")
	}
	if err := sc.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	seg := p.Segments()[0]
	tests := []struct {
		name   string
		addr   uint64
		n      int64
		found  bool
		live   bool
		sym    bool
		symOff int64
	}{
		{"block start", a.Addr, 4096, true, true, true, 0},
		{"inside second block", b.Addr + 100, 8092, true, true, true, 4096 + 100},
		{"span past its block", b.Addr + 100, 8093, true, true, false, 0},
		{"span across two blocks", a.Addr, 4097, true, true, false, 0},
		{"zero length", a.Addr, 0, true, true, false, 0},
		{"free tail", seg.Base + 20000, 1, true, false, false, 0},
		{"below the segment", seg.Base - 1, 1, false, false, false, 0},
		{"past the segment", seg.Base + uint64(seg.Size), 1, false, false, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loc, found := p.Lookup(tc.addr)
			if found != tc.found || loc.Live != tc.live {
				t.Fatalf("Lookup = %+v, %v", loc, found)
			}
			if found && (loc.Segment != seg || loc.Off != int64(tc.addr-seg.Base)) {
				t.Fatalf("Lookup = %+v", loc)
			}
			s, off, ok := p.Symmetric(tc.addr, tc.n, gid)
			if ok != tc.sym || (ok && (s != seg.ID || off != tc.symOff)) {
				t.Fatalf("Symmetric = %d %d %v", s, off, ok)
			}
		})
	}
	if loc, _ := p.Lookup(b.Addr + 5); loc.Block != b {
		t.Fatalf("Lookup block %+v, want %+v", loc.Block, b)
	}
	if _, _, ok := p.Symmetric(a.Addr, 1, gid+1); ok {
		t.Fatal("symmetric with a group that never registered")
	}
	if _, _, ok := p.Symmetric(a.Addr, 1, -1); ok {
		t.Fatal("symmetric with a negative group id")
	}
}
