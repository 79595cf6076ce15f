package pool

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

// Freed reports whether addr lies inside one of the pool's segments but not
// inside an allocated block: memory that was freed (or never handed out),
// which a later allocation may own.
func (p *Pool) Freed(addr uint64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s := p.segAtLocked(addr)
	return s != nil && s.blocks[s.blockAt(int64(addr-s.seg.Base))].state != stateLive
}
