package pool

import "slices"

// Live reports whether the block that Alloc returned with generation gen,
// holding addr, is still allocated: false once it was freed, also when a
// later allocation took addr's place, wherever that one starts
// (generations are unique: an address inside a live block carries that
// block's).
func (p *Pool) Live(addr, gen uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := p.segAtLocked(addr)
	if s == nil {
		return false
	}
	b := &s.blocks[s.blockAt(int64(addr-s.seg.Base))]
	return b.state == stateLive && b.gen == gen
}

// Freed reports whether some byte of [addr, addr+n) lies inside one of the
// pool's segments but not inside an allocated block: memory that was freed
// (or never handed out), which a later allocation may own. (A span that
// starts in a live block may run on into such memory.)
func (p *Pool) Freed(addr uint64, n int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	end := addr + uint64(max(n, 1))
	for a := addr; a < end; {
		s := p.segAtLocked(a)
		if s == nil { // not pool memory here: the next segment, if any, further on
			next, ok := p.nextBaseLocked(a)
			if !ok || next >= end {
				return false
			}
			a = next
			continue
		}
		for i := s.blockAt(int64(a - s.seg.Base)); i < len(s.blocks); i++ {
			b := &s.blocks[i]
			if s.seg.Base+uint64(b.off) >= end {
				return false
			}
			if b.state != stateLive {
				return true
			}
		}
		a = s.seg.Base + uint64(s.seg.Size)
	}
	return false
}

// nextBaseLocked is the lowest segment base above addr.
func (p *Pool) nextBaseLocked(addr uint64) (uint64, bool) {
	i, _ := slices.BinarySearch(p.bases, addr+1)
	if i == len(p.bases) {
		return 0, false
	}
	return p.bases[i], true
}
