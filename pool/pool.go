package pool

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/wait"
)

const (
	// defaultMinSegment is Options.MinSegment's default.
	defaultMinSegment = 64 << 20
	// quantum is the granule of blocks: every block's offset and size are
	// multiples of it, so alignments below quantum are satisfied for free.
	quantum = 256
	// MaxGroups is the number of groups a pool can hold at once.
	MaxGroups = 64
	// MaxAlloc is the largest size Alloc accepts.
	MaxAlloc = 1 << 48
)

// Options configures a pool.
type Options struct {
	MinSegment int64         // smallest segment created on demand; 0 = 64 MiB
	Cap        int64         // most bytes of segments the pool may hold; 0 = unlimited
	Timeout    time.Duration // bound on each collective (exchange + registration); 0 = 60 s (symmem's one default)
}

// Block is one allocation. Size is the block's capacity: the request rounded
// up to 256 bytes (every block's offset and size are multiples of 256).
type Block struct {
	Addr uint64    // this rank's address of the block's first byte
	Size int64     // bytes
	Seg  SegmentID // segment holding the block
	Off  int64     // offset of the block within its segment (equal on every rank)
	Gen  uint64    // allocation number, unique in the pool: tells a freed block from a later one at the same address
}

// GroupID identifies a group within a pool: a small integer below MaxGroups,
// assigned lowest-free-first by AddGroup, so the same AddGroup/RemoveGroup
// sequence gives the same ids on every rank.
type GroupID int

// groupSet is a set of GroupIDs.
type groupSet uint64

// has reports whether id is in the set.
func (s groupSet) has(id GroupID) bool {
	return id >= 0 && id < MaxGroups && s&(1<<uint(id)) != 0
}

// Pool is one process's (or device's) symmetric pool, shared by all groups.
type Pool struct {
	prov    Provider
	opts    Options
	segGran int64 // segment rounding: max(provider granularity, quantum)

	trimMu  sync.Mutex   // held by Trim and Close; AddGroup waits for it
	mu      sync.RWMutex // guards everything below
	closed  bool
	nextID  SegmentID
	byID    []*segment // creation order (ascending id)
	byBase  []*segment // ascending base address, for Lookup
	bases   []uint64   // bases[i] == byBase[i].seg.Base
	free    freeTree   // free blocks by (size, seg, off)
	pending []pending  // freed ranges whose fence was not done at Free (fence.go)
	groups  [MaxGroups]*group
	log     allocLog
	stateH  uint64 // hash of the allocation state (allocState)

	gen                                 uint64 // allocations made (Block.Gen)
	reserved, inUse, pendingBytes, peak int64
	liveBlocks                          int
}

// New creates a pool over a provider.
func New(p Provider, opts Options) (*Pool, error) {
	if p == nil {
		return nil, errors.New("pool: New: provider is nil; pass the backend's Provider")
	}
	g := p.Granularity()
	if g <= 0 || g&(g-1) != 0 {
		return nil, fmt.Errorf("pool: New: provider granularity %d is not a positive power of two", g)
	}
	if opts.MinSegment < 0 || opts.Cap < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("pool: New: negative option (MinSegment %d, Cap %d, Timeout %v); use 0 for the default: %w", opts.MinSegment, opts.Cap, opts.Timeout, errs.Invalid)
	}
	if opts.MinSegment == 0 {
		opts.MinSegment = defaultMinSegment
	}
	if opts.Timeout == 0 {
		opts.Timeout = wait.DefaultTimeout
	}
	pl := &Pool{prov: p, opts: opts, segGran: max(g, quantum)}
	pl.opts.MinSegment = roundUp(opts.MinSegment, pl.segGran)
	return pl, nil
}

func roundUp(x, m int64) int64 { return (x + m - 1) &^ (m - 1) }

func checkSize(what string, size int64) error {
	if size <= 0 || size > MaxAlloc {
		return fmt.Errorf("%w: %s(%d): size must be in 1..2^48 bytes", ErrInvalidSize, what, size)
	}
	return nil
}

// Reserve pre-creates one segment of bytes rounded up to the provider's
// granularity, as SGLang's pre-allocation option does, so later allocations
// fit without growing. It counts against Cap.
func (p *Pool) Reserve(bytes int64) error {
	if err := checkSize("Reserve", bytes); err != nil {
		return err
	}
	size := roundUp(bytes, p.segGran)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("pool: Reserve: %w", ErrClosed)
	}
	if p.opts.Cap > 0 && p.reserved+size > p.opts.Cap {
		return fmt.Errorf("%w: Reserve(%d) needs a %d-byte segment; %d of the cap of %d bytes are reserved (raise Options.Cap or Trim)",
			ErrCapExceeded, bytes, size, p.reserved, p.opts.Cap)
	}
	if err := p.fitsLocked(fmt.Sprintf("pool: Reserve(%d)", bytes), size); err != nil {
		return err
	}
	err := p.createSegmentLocked(size)
	return err
}

// Alloc returns a block of at least size bytes whose offset in its segment
// is a multiple of align (a power of two, at most the provider's
// granularity). See the package documentation for the symmetry contract.
func (p *Pool) Alloc(size, align int64) (Block, error) {
	if err := checkSize("Alloc", size); err != nil {
		return Block{}, err
	}
	if align <= 0 || align&(align-1) != 0 {
		return Block{}, fmt.Errorf("%w: Alloc(%d, %d): use a power of two (1 for no alignment)", ErrInvalidAlignment, size, align)
	}
	if align > p.segGran {
		return Block{}, fmt.Errorf("%w: Alloc(%d, %d): alignment above the segment granularity %d cannot be guaranteed for addresses",
			ErrInvalidAlignment, size, align, p.segGran)
	}
	need, a := roundUp(size, quantum), max(align, quantum)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Block{}, fmt.Errorf("pool: Alloc: %w", ErrClosed)
	}
	if len(p.pending) > 0 {
		p.dropDoneLocked()
	}
	k, off, ok := p.findFitLocked(need, a)
	if !ok {
		if err := p.growLocked(size, need); err != nil {
			return Block{}, err
		}
		if k, off, ok = p.findFitLocked(need, a); !ok {
			panic("pool: internal error: fresh segment does not fit the request")
		}
	}
	seg := k.seg
	peak := p.peak
	b := p.carveLocked(k, off, need)
	if len(p.pending) > 0 {
		s := seg
		if err := p.awaitLocked(s, b.Off, b.Size); err != nil {
			p.inUse -= b.Size
			p.peak = peak
			p.liveBlocks--
			p.releaseLocked(s, s.blockAt(b.Off))
			return Block{}, fmt.Errorf("pool: Alloc(%d): %w", size, err)
		}
	}
	e := logEntry{op: opAlloc, size: size, align: align, seg: b.Seg, off: b.Off}
	p.log.add(e)
	h := e.hash()
	lb := &seg.blocks[seg.blockAt(b.Off)]
	lb.h, lb.asked, lb.align = h, size, align
	p.stateH += h
	return b, nil
}

// growLocked creates a segment big enough for need bytes at offset 0.
func (p *Pool) growLocked(size, need int64) error {
	own := roundUp(need, p.segGran)
	want := max(p.opts.MinSegment, own)
	if c := p.opts.Cap; c > 0 && p.reserved+want > c {
		// Shrink to what is left under the cap, if the request still fits.
		want = (c - p.reserved) &^ (p.segGran - 1)
		if want < own {
			return fmt.Errorf("%w: Alloc(%d) needs a new %d-byte segment; %d of the cap of %d bytes are reserved (free or Trim blocks, or raise Options.Cap)",
				ErrCapExceeded, size, own, p.reserved, c)
		}
	}
	if err := p.fitsLocked(fmt.Sprintf("pool: Alloc(%d)", size), want); err != nil {
		return err
	}
	err := p.createSegmentLocked(want)
	return err
}

// Free returns a block (by its Addr) to the pool. With a non-nil fence that
// is not yet done, the block's space is placed as if free (so placement stays
// symmetric) but whoever is handed it next waits for the fence first.
func (p *Pool) Free(addr uint64, f Fence) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("pool: Free: %w", ErrClosed)
	}
	s := p.segAtLocked(addr)
	if s == nil {
		return fmt.Errorf("%w: Free(%#x): not inside any segment of this pool", ErrNotAllocated, addr)
	}
	off := int64(addr - s.seg.Base)
	bi := s.blockAt(off)
	b := &s.blocks[bi]
	switch {
	case b.state != stateLive:
		return fmt.Errorf("%w: Free(%#x): segment %d offset %d is not allocated (freed before?)", ErrDoubleFree, addr, s.seg.ID, off)
	case b.off != off:
		return fmt.Errorf("%w: Free(%#x): address is inside the block at segment %d offset %d, not its start; pass Block.Addr",
			ErrNotAllocated, addr, s.seg.ID, b.off)
	}
	size := b.size
	p.stateH -= b.h
	p.inUse -= size
	p.liveBlocks--
	if f != nil && !f.Done() {
		p.pending = append(p.pending, pending{seg: s, off: off, size: size, fence: f})
		p.pendingBytes += size
	}
	p.releaseLocked(s, bi)
	p.log.add(logEntry{op: opFree, size: size, seg: s.seg.ID, off: off})
	return nil
}

// Segments lists the pool's segments in creation order.
func (p *Pool) Segments() []Segment {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Segment, len(p.byID))
	for i, s := range p.byID {
		out[i] = s.seg
	}
	return out
}

// Stats is a snapshot of the pool's accounting. The C ABI's
// symmem_doctor (python's symmem.doctor()) writes it as its "pool"
// object, so it has the snake_case keys of the rest of that JSON.
type Stats struct {
	Reserved   int64        `json:"reserved_bytes"` // bytes of all segments
	InUse      int64        `json:"in_use_bytes"`   // bytes of live blocks
	Pending    int64        `json:"pending_bytes"`  // bytes of blocks freed with a fence that is not done yet
	Peak       int64        `json:"peak_bytes"`     // highest InUse seen
	Segments   int          `json:"segments"`
	LiveBlocks int          `json:"live_blocks"`
	Groups     []GroupStats `json:"groups"` // live groups, by id
}

// GroupStats describes one group's registrations.
type GroupStats struct {
	ID              GroupID `json:"id"`
	Name            string  `json:"name"`
	Registered      int     `json:"registered_segments"` // segments registered with the group
	RegisteredBytes int64   `json:"registered_bytes"`    // their bytes
	OpenScopes      int     `json:"open_scopes"`
}

// Stats returns a snapshot of the pool's accounting.
func (p *Pool) Stats() Stats {
	p.mu.Lock() // forgets fences done since the last Alloc, so Pending is now's
	defer p.mu.Unlock()
	if len(p.pending) > 0 {
		p.dropDoneLocked()
	}
	st := Stats{Reserved: p.reserved, InUse: p.inUse, Pending: p.pendingBytes, Peak: p.peak,
		Segments: len(p.byID), LiveBlocks: p.liveBlocks}
	for _, g := range p.groups {
		if g == nil {
			continue
		}
		gs := GroupStats{ID: g.id, Name: g.name, OpenScopes: len(g.scopes)}
		for _, s := range p.byID {
			if s.groups.has(g.id) {
				gs.Registered++
				gs.RegisteredBytes += s.seg.Size
			}
		}
		st.Groups = append(st.Groups, gs)
	}
	return st
}

// counts is the number of bookkeeping entries of each kind, for leak tests.
type counts struct {
	Segments, Blocks, FreeKeys, Pending, Registrations, Scopes, Groups int
}

func (p *Pool) counts() counts {
	p.mu.RLock()
	defer p.mu.RUnlock()
	c := counts{Segments: len(p.byID) + len(p.byBase) + len(p.bases), FreeKeys: p.free.n, Pending: len(p.pending)}
	for _, s := range p.byID {
		c.Blocks += len(s.blocks)
		for x := uint64(s.groups); x != 0; x &= x - 1 {
			c.Registrations++
		}
	}
	for _, g := range p.groups {
		if g != nil {
			c.Groups++
			c.Scopes += len(g.scopes)
		}
	}
	return c
}
