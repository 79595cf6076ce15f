package pool

import (
	"fmt"
	"slices"
)

const (
	stateFree uint8 = iota
	stateLive
)

// blk is a run of a segment; a segment's blocks partition it, sorted by off.
type blk struct {
	off, size int64
	state     uint8
	gen       uint64 // live blocks: the allocation's generation (Block.Gen)
	h         uint64 // live blocks: their share of the pool's state hash (verify.go)
	asked     int64  // live blocks: the size and alignment Alloc was called with,
	align     int64  // to name a block that differs between ranks (liveEntriesLocked)
}

type segment struct {
	seg      Segment
	blocks   []blk
	groups   groupSet // groups this segment is registered with
	trimming bool     // held out of the free index by a Trim in progress
}

// blockAt returns the index of the block containing off (0 <= off < size).
func (s *segment) blockAt(off int64) int {
	lo, hi := 0, len(s.blocks)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if s.blocks[m].off <= off {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// segAtLocked returns the segment containing addr, or nil.
func (p *Pool) segAtLocked(addr uint64) *segment {
	bases := p.bases // contiguous copy of the bases: no pointer chasing
	lo, hi := 0, len(bases)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bases[m] <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil
	}
	s := p.byBase[lo-1]
	if addr-s.seg.Base >= uint64(s.seg.Size) {
		return nil
	}
	return s
}

func (p *Pool) addFree(s *segment, off, size int64) {
	if !s.trimming {
		p.free.insert(freeKey{size: size, id: s.seg.ID, off: off, seg: s})
	}
}

func (p *Pool) removeFree(s *segment, off, size int64) {
	if !p.free.remove(freeKey{size: size, id: s.seg.ID, off: off}) {
		panic(fmt.Sprintf("pool: internal error: free block seg %d off %d size %d not indexed", s.seg.ID, off, size))
	}
}

// findFitLocked returns the smallest free block (in (size, segment, offset)
// order) that holds need bytes at an offset aligned to a, and that offset.
func (p *Pool) findFitLocked(need, a int64) (freeKey, int64, bool) {
	for k, ok := p.free.ceil(freeKey{size: need}); ok; k, ok = p.free.next(k) {
		if ao := roundUp(k.off, a); ao+need <= k.off+k.size {
			return k, ao, true
		}
	}
	return freeKey{}, 0, false
}

// carveLocked allocates [off, off+need) out of the free block k.
func (p *Pool) carveLocked(k freeKey, off, need int64) Block {
	p.free.remove(k)
	s := k.seg
	bi := s.blockAt(k.off)
	end := k.off + k.size
	var parts [3]blk
	n := 0
	if off > k.off {
		parts[n] = blk{off: k.off, size: off - k.off}
		n++
	}
	p.gen++
	parts[n] = blk{off: off, size: need, state: stateLive, gen: p.gen}
	n++
	if off+need < end {
		parts[n] = blk{off: off + need, size: end - off - need}
		n++
	}
	s.blocks = slices.Replace(s.blocks, bi, bi+1, parts[:n]...)
	for _, b := range parts[:n] {
		if b.state == stateFree {
			p.addFree(s, b.off, b.size)
		}
	}
	p.inUse += need
	p.peak = max(p.peak, p.inUse)
	p.liveBlocks++
	return Block{Addr: s.seg.Base + uint64(off), Size: need, Seg: s.seg.ID, Off: off, Gen: p.gen}
}

// releaseLocked marks block bi free and coalesces it with free neighbours.
func (p *Pool) releaseLocked(s *segment, bi int) {
	b := s.blocks[bi]
	lo, hi := bi, bi+1
	off, size := b.off, b.size
	if bi > 0 && s.blocks[bi-1].state == stateFree {
		prev := s.blocks[bi-1]
		p.removeFreeIfIndexed(s, prev)
		lo, off, size = bi-1, prev.off, size+prev.size
	}
	if bi+1 < len(s.blocks) && s.blocks[bi+1].state == stateFree {
		next := s.blocks[bi+1]
		p.removeFreeIfIndexed(s, next)
		hi, size = bi+2, size+next.size
	}
	s.blocks = slices.Replace(s.blocks, lo, hi, blk{off: off, size: size})
	p.addFree(s, off, size)
}

func (p *Pool) removeFreeIfIndexed(s *segment, b blk) {
	if !s.trimming {
		p.removeFree(s, b.off, b.size)
	}
}

// createSegmentLocked asks the provider for a segment and tracks it.
func (p *Pool) createSegmentLocked(size int64) error {
	id := p.nextID + 1
	base, err := p.prov.CreateSegment(id, size)
	if err != nil {
		return fmt.Errorf("pool: creating segment %d of %d bytes: %w", id, size, err)
	}
	bad := ""
	if base%uint64(p.segGran) != 0 {
		bad = fmt.Sprintf("base %#x is not aligned to %d", base, p.segGran)
	} else if base+uint64(size) < base {
		bad = fmt.Sprintf("base %#x + %d overflows", base, size)
	} else if o := p.overlapLocked(base, size); o != nil {
		bad = fmt.Sprintf("[%#x, +%d) overlaps segment %d", base, size, o.seg.ID)
	}
	if bad != "" {
		rerr := p.prov.ReleaseSegment(id)
		return fmt.Errorf("pool: provider returned a bad segment %d: %s (release: %v)", id, bad, rerr)
	}
	p.nextID = id
	p.stateH += segHash(id, size)
	s := &segment{seg: Segment{ID: id, Base: base, Size: size}, blocks: []blk{{off: 0, size: size}}}
	p.byID = append(p.byID, s)
	i, _ := slices.BinarySearchFunc(p.byBase, base, func(x *segment, b uint64) int {
		switch {
		case x.seg.Base < b:
			return -1
		case x.seg.Base > b:
			return 1
		}
		return 0
	})
	p.byBase = slices.Insert(p.byBase, i, s)
	p.bases = slices.Insert(p.bases, i, base)
	p.addFree(s, 0, size)
	p.reserved += size
	return nil
}

func (p *Pool) overlapLocked(base uint64, size int64) *segment {
	for _, s := range []*segment{p.segAtLocked(base), p.segAtLocked(base + uint64(size) - 1)} {
		if s != nil {
			return s
		}
	}
	// A smaller existing segment strictly inside [base, base+size).
	for _, s := range p.byBase {
		if s.seg.Base >= base && s.seg.Base < base+uint64(size) {
			return s
		}
	}
	return nil
}

// dropSegmentLocked removes a segment's bookkeeping (its blocks must all be
// free and out of the free index).
func (p *Pool) dropSegmentLocked(s *segment) {
	p.byID = slices.DeleteFunc(p.byID, func(x *segment) bool { return x == s })
	i := slices.Index(p.byBase, s)
	p.byBase = slices.Delete(p.byBase, i, i+1)
	p.bases = slices.Delete(p.bases, i, i+1)
	p.reserved -= s.seg.Size
	p.stateH -= segHash(s.seg.ID, s.seg.Size)
	s.blocks = nil
}

// Location describes an address inside the pool.
type Location struct {
	Segment Segment
	Off     int64 // offset of the address within the segment
	Live    bool  // the address is inside an allocated block
	Block   Block // that block (zero unless Live)
}

// Lookup locates addr: O(log segments + log blocks), no allocation.
func (p *Pool) Lookup(addr uint64) (Location, bool) {
	p.mu.RLock()
	s := p.segAtLocked(addr)
	if s == nil {
		p.mu.RUnlock()
		return Location{}, false
	}
	off := int64(addr - s.seg.Base)
	b := s.blocks[s.blockAt(off)]
	loc := Location{Segment: s.seg, Off: off}
	if b.state == stateLive {
		loc.Live = true
		loc.Block = Block{Addr: s.seg.Base + uint64(b.off), Size: b.size, Seg: s.seg.ID, Off: b.off, Gen: b.gen}
	}
	p.mu.RUnlock()
	return loc, true
}

// Symmetric reports whether [addr, addr+n) lies inside one live block whose
// segment is registered with group id, and returns the segment and the
// offset of addr within it.
func (p *Pool) Symmetric(addr uint64, n int64, id GroupID) (seg SegmentID, off int64, ok bool) {
	if n <= 0 {
		return 0, 0, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := p.segAtLocked(addr)
	if s == nil || !s.groups.has(id) {
		return 0, 0, false
	}
	off = int64(addr - s.seg.Base)
	b := &s.blocks[s.blockAt(off)]
	if b.state != stateLive || n > b.off+b.size-off {
		return 0, 0, false
	}
	return s.seg.ID, off, true
}
