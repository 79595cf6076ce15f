package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/reduce"
)

// Multi-process behaviour (registration, fd exchange, collectives, killed
// ranks) is tested through the user API in the root package, which starts
// real processes. These tests cover the parts that work in one process.

func memfdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.Contains(l, "memfd:symmem") {
			n++
		}
	}
	return n
}

func TestProvider(t *testing.T) {
	p := NewProvider()
	pg := p.Granularity()
	if pg != int64(os.Getpagesize()) || pg&(pg-1) != 0 {
		t.Fatalf("granularity %d, want the page size", pg)
	}
	before := memfdCount(t)
	for _, tc := range []struct {
		name string
		id   uint64
		size int64
		want string
	}{
		{"zero", 1, 0, "not a positive multiple"},
		{"unaligned", 1, pg + 1, "not a positive multiple"},
		{"ok", 1, 4 * pg, ""},
		{"duplicate", 1, pg, "already exists"},
		{"second", 2, pg, ""},
	} {
		base, err := p.CreateSegment(segID(tc.id), tc.size)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
			}
			continue
		}
		if err != nil || base == 0 || base%uint64(pg) != 0 {
			t.Fatalf("%s: base %#x err %v", tc.name, base, err)
		}
		b := hostmem.Bytes(base, int(tc.size))
		b[0], b[len(b)-1] = 1, 2 // mapped and writable
	}
	if p.Len() != 2 || memfdCount(t) != before+2 {
		t.Fatalf("%d segments, %d new memfds; want 2 and 2", p.Len(), memfdCount(t)-before)
	}
	fd, err := p.fd(1)
	if err != nil {
		t.Fatal(err)
	}
	// A second mapping of the memfd (what a peer does) sees the same bytes.
	m, err := mapPeer(fd, 4*pg)
	if err != nil {
		t.Fatal(err)
	}
	if m[0] != 1 || m[len(m)-1] != 2 {
		t.Errorf("peer mapping sees %d..%d, want 1..2", m[0], m[len(m)-1])
	}
	if _, err := mapPeer(fd, pg); err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Errorf("size mismatch: %v", err)
	}
	unix.Munmap(m)
	if err := p.ReleaseSegment(1); err != nil {
		t.Fatal(err)
	}
	if err := p.ReleaseSegment(1); err == nil {
		t.Error("double release succeeded")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CreateSegment(3, pg); err == nil {
		t.Error("CreateSegment after Close succeeded")
	}
	if n := memfdCount(t); n != before {
		t.Errorf("%d memfds left open after Close", n-before)
	}
}

// padPair builds the pads of a 2-rank group inside one process: each side
// maps the other's pad as a peer would.
func padPair(t *testing.T) [2]*pads {
	t.Helper()
	var ps [2]*pads
	for r := range ps {
		p, err := newPads(2, r)
		if err != nil {
			t.Fatal(err)
		}
		ps[r] = p
	}
	for r := range ps {
		m, err := mapPeer(ps[1-r].fd, padSize(2))
		if err != nil {
			t.Fatal(err)
		}
		ps[r].peers[1-r] = m
	}
	t.Cleanup(func() { ps[0].close(); ps[1].close() })
	return ps
}

func alive(int) error { return nil }

func TestPadsSignalWait(t *testing.T) {
	ps := padPair(t)
	ctx := context.Background()
	far := time.Now().Add(5 * time.Second)
	// Already signalled: returns at once; a later value implies earlier ones.
	if err := ps[0].signal(1, 3); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{1, 2, 3} {
		if err := ps[1].wait(ctx, 0, v, far, alive); err != nil {
			t.Fatalf("wait %d: %v", v, err)
		}
	}
	// Sleeping waiter (past the spin) is woken by the futex.
	done := make(chan error, 1)
	go func() { done <- ps[1].wait(ctx, 0, 4, far, alive) }()
	time.Sleep(50 * time.Millisecond)
	if err := ps[0].signal(1, 4); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("sleeping waiter was not woken")
	}
	// Wrap-around: values compare modulo 2^32.
	if err := ps[1].signal(0, 2); err != nil {
		t.Fatal(err)
	}
	if err := ps[0].wait(ctx, 1, ^uint32(0)-5, far, alive); err != nil {
		t.Fatalf("wrap-around wait: %v", err)
	}
}

func TestPadsTimeoutAndDeath(t *testing.T) {
	ps := padPair(t)
	ctx := context.Background()
	start := time.Now()
	err := ps[0].wait(ctx, 1, 1, time.Now().Add(100*time.Millisecond), alive)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("timeout: err %v after %v", err, time.Since(start))
	}
	dead := fmt.Errorf("rank 1 (pid 42) exited: %w", errs.PeerExited)
	err = ps[0].wait(ctx, 1, 1, time.Now().Add(5*time.Second), func(int) error { return dead })
	if !errors.Is(err, errs.PeerExited) {
		t.Errorf("dead peer: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := ps[0].wait(cctx, 1, 1, time.Now().Add(5*time.Second), alive); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestCrew(t *testing.T) {
	const n = 3<<20 + 192 // maxPiece pieces and a short last piece
	mk := func(seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)*7 + seed
		}
		return b
	}
	a, b, c := mk(1), mk(2), mk(3)
	for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max} {
		want := make([]byte, n)
		if err := reduce.ReduceN(want, [][]byte{a, b, c}, coll.Int32, op); err != nil {
			t.Fatal(err)
		}
		if err := reduce.Finish(want, coll.Int32, op, 3); err != nil {
			t.Fatal(err)
		}
		// Out of place, and in place with dst aliasing the middle source.
		got := make([]byte, n)
		mid := bytes.Clone(b)
		cp := make([]byte, n)
		ts := []task{
			{dst: got, srcs: [][]byte{a, b, c}, reduce: true},
			{dst: mid, srcs: [][]byte{a, mid, c}, reduce: true},
			{dst: cp, srcs: [][]byte{a}},
		}
		for _, s := range []split{
			{workers: 2, inline: 1 << 30},                 // too small to share: the caller alone
			{workers: 2, inline: 256 << 10, minPiece: 64}, // maxPiece pieces
			{workers: 8, inline: 256 << 10, minPiece: 64}, // about two pieces per worker
			{workers: 3, minPiece: 3 << 20},               // one piece per task, 3 workers
			{workers: 8, minPiece: 64, spin: time.Hour},   // helpers that never sleep
		} {
			clear(got)
			copy(mid, b)
			clear(cp)
			c := newCrew(s)
			err := c.run(ts, coll.Int32, op)
			c.stop()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || !bytes.Equal(mid, want) || !bytes.Equal(cp, a) {
				t.Errorf("%v, %+v: out-of-place ok=%v in-place ok=%v copy ok=%v", op, s, bytes.Equal(got, want), bytes.Equal(mid, want), bytes.Equal(cp, a))
			}
		}
		// Six sources, dst aliasing the last (a group of six, in place).
		six := [][]byte{a, b, c, mk(4), mk(5), mk(6)}
		want6 := make([]byte, n)
		reduce.ReduceN(want6, six, coll.Int32, op)
		reduce.Finish(want6, coll.Int32, op, 6)
		six[5] = bytes.Clone(six[5])
		c := newCrew(split{workers: 2, minPiece: 64})
		defer c.stop()
		if err := c.run([]task{{dst: six[5], srcs: six, reduce: true}}, coll.Int32, op); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(six[5], want6) {
			t.Errorf("%v: six sources in place: wrong result", op)
		}
	}
}

// TestCrewStops: stop ends the helpers, whether they poll (for an hour
// here) or sleep, and returns once they have returned.
func TestCrewStops(t *testing.T) {
	src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
	for _, spin := range []time.Duration{0, time.Hour} {
		before := runtime.NumGoroutine()
		c := newCrew(split{workers: 4, minPiece: 64 << 10, spin: spin})
		if err := c.run([]task{{dst: dst, srcs: [][]byte{src}}}, coll.Uint8, coll.Sum); err != nil {
			t.Fatal(err)
		}
		running := runtime.NumGoroutine()
		c.stop()
		// Other tests' goroutines may end meanwhile, never start: at least
		// the 3 helpers are gone. A helper has called Done just before it
		// exits: give the runtime a moment to count it gone.
		after := runtime.NumGoroutine()
		for end := time.Now().Add(time.Second); running-after < 3 && time.Now().Before(end); after = runtime.NumGoroutine() {
			time.Sleep(time.Millisecond)
		}
		if running-after < 3 {
			t.Fatalf("spin %v: %d goroutines before the crew, %d with it, %d after stop; want 3 fewer after stop", spin, before, running, after)
		}
	}
}

func TestPieceSize(t *testing.T) {
	s := split{workers: 8, inline: 256 << 10, minPiece: 32 << 10}
	for _, c := range []struct{ total, want int }{
		{256 << 10, 32 << 10},    // the floor
		{1 << 20, 64 << 10},      // two per worker
		{1<<20 + 1, 64<<10 + 64}, // rounded up to 64 bytes
		{64 << 20, maxPiece},     // the cap
	} {
		if got := s.pieceSize(c.total); got != c.want {
			t.Errorf("pieceSize(%d) = %d, want %d", c.total, got, c.want)
		}
	}
}

func segID(i uint64) pool.SegmentID { return pool.SegmentID(i) }

func TestOneShotChoice(t *testing.T) {
	for _, c := range []struct {
		n       int
		bytes   int64
		inPlace bool
		want    bool
	}{
		{2, 1 << 20, false, true},
		{2, 1<<20 + 4, false, false},
		{3, 512 << 10, false, true},
		{3, 512<<10 + 4, false, false},
		{8, 128 << 10, false, true},
		{8, 256 << 10, false, false},
		{2, 64 << 10, true, true}, // in place: the scratch copy costs more
		{2, 128 << 10, true, false},
		{1, 1 << 30, true, false},
	} {
		if got := oneShot(c.n, c.bytes, c.inPlace); got != c.want {
			t.Errorf("oneShot(n=%d, %d bytes, in-place %v) = %v, want %v", c.n, c.bytes, c.inPlace, got, c.want)
		}
	}
}

// TestCrewManyStages runs thousands of stages back to back on one crew, of
// random sizes (one piece to dozens, several tasks), with helpers that
// poll and helpers that sleep after every stage, and checks every stage's
// bytes: the reused stage state, the piece tickets and the caller's wake
// (a stale token from one stage must not end the next early) hold up when
// helpers arrive late or not at all.
func TestCrewManyStages(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 16))
	const max = 48 << 10
	srcs := [3][]byte{make([]byte, max), make([]byte, max), make([]byte, max)}
	dsts := [3][]byte{make([]byte, max), make([]byte, max), make([]byte, max)}
	for _, spin := range []time.Duration{0, 200 * time.Microsecond} {
		c := newCrew(split{workers: 4, minPiece: 64, spin: spin})
		for stage := range 3000 {
			nt := 1 + r.IntN(3)
			ts := make([]task, nt)
			for i := range ts {
				n := r.IntN(max/64+1) * 64
				s := srcs[i][:n]
				for j := range s {
					s[j] = byte(stage + i + j)
				}
				clear(dsts[i][:n])
				ts[i] = task{dst: dsts[i][:n], srcs: [][]byte{s}}
			}
			if err := c.run(ts, coll.Uint8, coll.Sum); err != nil {
				t.Fatal(err)
			}
			for i, tk := range ts {
				if !bytes.Equal(tk.dst, tk.srcs[0]) {
					c.stop()
					t.Fatalf("spin %v, stage %d, task %d (%d bytes): wrong bytes", spin, stage, i, len(tk.dst))
				}
			}
		}
		c.stop()
	}
}

// TestPadsStateAfterClose: a state change on closed pads (a Leave after
// the group's Close) does nothing; before, it indexed the unmapped pads.
func TestPadsStateAfterClose(t *testing.T) {
	ps := padPair(t)
	ps[0].setState(members.StateLeft)
	if got := atomic.LoadUint32(ps[1].state(0)); got&members.StateLeft == 0 {
		t.Fatalf("peer sees state %#x, want StateLeft", got)
	}
	ps[0].close()
	ps[0].setState(members.StateFailed) // must not panic
}
