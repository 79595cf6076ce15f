package pool

// Live reports whether the block that Alloc returned with address addr and
// generation gen is still allocated: false once it was freed, also when a
// later allocation starting at addr took its place. (An addr that is not a
// block's start is not judged here: true, and Free says what is wrong.)
func (p *Pool) Live(addr, gen uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := p.segAtLocked(addr)
	if s == nil {
		return false
	}
	b := &s.blocks[s.blockAt(int64(addr-s.seg.Base))]
	if b.state != stateLive {
		return false
	}
	return b.gen == gen || s.seg.Base+uint64(b.off) != addr
}

// Freed reports whether addr lies inside one of the pool's segments but not
// inside an allocated block: memory that was freed (or never handed out),
// which a later allocation may own.
func (p *Pool) Freed(addr uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := p.segAtLocked(addr)
	return s != nil && s.blocks[s.blockAt(int64(addr-s.seg.Base))].state != stateLive
}
