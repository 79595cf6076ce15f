package pool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// In-process fakes for the pure logic: a hub connecting simulated ranks
// (goroutines), a provider handing out distinct fake address ranges per rank,
// and fences. Real backends are tested in their own packages.

type hub struct {
	n      int
	mu     sync.Mutex
	rounds map[uint64]*round
}

type round struct {
	data [][]byte
	got  int
	read int
	done chan struct{}
}

func newHub(n int) *hub { return &hub{n: n, rounds: map[uint64]*round{}} }

func (h *hub) pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.rounds)
}

// member is one rank's view of a group; it implements Group.
type member struct {
	h     *hub
	rank  int
	name  string
	calls atomic.Uint64

	mu         sync.Mutex
	log        []string // "R3", "D3"
	registered map[SegmentID]bool
	failReg    SegmentID // Register of this segment fails
	failDereg  SegmentID // Deregister of this segment fails
}

func newGroup(name string, n int) []*member {
	h := newHub(n)
	ms := make([]*member, n)
	for r := range ms {
		ms[r] = &member{h: h, rank: r, name: name, registered: map[SegmentID]bool{}}
	}
	return ms
}

func (m *member) Rank() int    { return m.rank }
func (m *member) Size() int    { return m.h.n }
func (m *member) Name() string { return m.name }

// Agreer: none, every scope end goes through AllGather.
func (m *member) Agreer() Agreer { return nil }

func (m *member) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	k := m.calls.Add(1) - 1
	h := m.h
	h.mu.Lock()
	r := h.rounds[k]
	if r == nil {
		r = &round{data: make([][]byte, h.n), done: make(chan struct{})}
		h.rounds[k] = r
	}
	r.data[m.rank] = slices.Clone(mine)
	r.got++
	if r.got == h.n {
		close(r.done)
	}
	h.mu.Unlock()
	select {
	case <-r.done:
		h.mu.Lock()
		defer h.mu.Unlock()
		out := make([][]byte, h.n)
		for i, d := range r.data {
			out[i] = slices.Clone(d)
		}
		if r.read++; r.read == h.n {
			delete(h.rounds, k)
		}
		return out, nil
	case <-ctx.Done():
		h.mu.Lock()
		defer h.mu.Unlock()
		var missing []int
		for i, d := range r.data {
			if d == nil {
				missing = append(missing, i)
			}
		}
		return nil, fmt.Errorf("fake all-gather #%d: ranks %v did not arrive: %w", k, missing, ctx.Err())
	}
}

func (m *member) Register(ctx context.Context, s Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.ID == m.failReg {
		return fmt.Errorf("fake register of segment %d refused", s.ID)
	}
	if m.registered[s.ID] {
		return fmt.Errorf("segment %d registered twice", s.ID)
	}
	m.registered[s.ID] = true
	m.log = append(m.log, fmt.Sprintf("R%d", s.ID))
	return nil
}

func (m *member) Deregister(ctx context.Context, s Segment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.ID == m.failDereg {
		return fmt.Errorf("fake deregister of segment %d refused", s.ID)
	}
	if !m.registered[s.ID] {
		return fmt.Errorf("segment %d deregistered but not registered", s.ID)
	}
	delete(m.registered, s.ID)
	m.log = append(m.log, fmt.Sprintf("D%d", s.ID))
	return nil
}

func (m *member) calls_() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

func (m *member) nRegistered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.registered)
}

func (m *member) registers() int {
	n := 0
	for _, c := range m.calls_() {
		if c[0] == 'R' {
			n++
		}
	}
	return n
}

// fakeProvider hands out address ranges that differ per rank, with gaps, so
// tests see that offsets (not addresses) are what is symmetric.
type fakeProvider struct {
	gran    int64
	mu      sync.Mutex
	next    uint64
	live    map[SegmentID]int64
	failNew bool
	created int
	badBase func(base uint64) uint64 // rewrites the next base, if set
}

func newProvider(rank int) *fakeProvider {
	return &fakeProvider{gran: 4096, next: uint64(rank+1)<<40 + uint64(rank)*3*4096, live: map[SegmentID]int64{}}
}

func (f *fakeProvider) Granularity() int64 { return f.gran }

func (f *fakeProvider) CreateSegment(id SegmentID, size int64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNew {
		return 0, fmt.Errorf("fake provider out of memory")
	}
	if _, ok := f.live[id]; ok {
		return 0, fmt.Errorf("segment %d created twice", id)
	}
	if size%f.gran != 0 {
		return 0, fmt.Errorf("size %d not rounded", size)
	}
	base := f.next
	f.next += uint64(size) + 2*uint64(f.gran)
	f.live[id] = size
	f.created++
	if f.badBase != nil {
		base = f.badBase(base)
		f.badBase = nil
	}
	return base, nil
}

func (f *fakeProvider) ReleaseSegment(id SegmentID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[id]; !ok {
		return fmt.Errorf("segment %d released but not live", id)
	}
	delete(f.live, id)
	return nil
}

func (f *fakeProvider) nLive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

type fence struct {
	done  atomic.Bool
	polls atomic.Int32 // > 0: becomes done after that many polls
}

func (f *fence) Done() bool {
	if f.polls.Load() > 0 && f.polls.Add(-1) == 0 {
		f.done.Store(true)
	}
	return f.done.Load()
}

// after returns a fence that completes after n polls, like a GPU event
// whose work finishes while the host waits.
func after(n int32) *fence {
	f := &fence{}
	f.polls.Store(n)
	return f
}

// newTestPool is a one-rank pool with small segments.
func newTestPool(t testing.TB, opts Options) (*Pool, *fakeProvider) {
	t.Helper()
	if opts.MinSegment == 0 {
		opts.MinSegment = 64 << 10
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	prov := newProvider(0)
	p, err := New(prov, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, prov
}

func mustAlloc(t testing.TB, p *Pool, size, align int64) Block {
	t.Helper()
	b, err := p.Alloc(size, align)
	if err != nil {
		t.Fatalf("Alloc(%d, %d): %v", size, align, err)
	}
	return b
}

// runRanks runs f on n goroutines and waits.
func runRanks(n int, f func(r int)) {
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(r) }()
	}
	wg.Wait()
}
