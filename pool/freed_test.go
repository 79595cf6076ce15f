package pool

import "testing"

// TestLiveAndFreed: a block is live until freed; a later block at the same
// address has another generation, so the old handle stays dead.
func TestLiveAndFreed(t *testing.T) {
	p, _ := newTestPool(t, Options{MinSegment: 64 << 10})
	a := mustAlloc(t, p, 1000, 1)
	if !p.Live(a.Addr, a.Gen) || p.Freed(a.Addr, 1) || p.Freed(a.Addr+999, 1) {
		t.Fatal("fresh block not live")
	}
	if err := p.Free(a.Addr, nil); err != nil {
		t.Fatal(err)
	}
	if p.Live(a.Addr, a.Gen) || !p.Freed(a.Addr, 1) || !p.Freed(a.Addr+999, 1) {
		t.Fatal("freed block still live")
	}
	b := mustAlloc(t, p, 1000, 1)
	if b.Addr != a.Addr || b.Gen == a.Gen {
		t.Fatalf("reuse: %+v after %+v", b, a)
	}
	if p.Live(a.Addr, a.Gen) || !p.Live(b.Addr, b.Gen) || p.Freed(a.Addr, 1) {
		t.Fatal("old handle live again, or new one dead")
	}
	if p.Live(0x1000, 1) {
		t.Fatal("an address outside the pool is live")
	}
}

// TestLiveInsideLaterBlock: a freed block whose address now lies inside a
// later, larger block starting before it is dead (the review found it
// reported live: Buffer.Bytes of the freed buffer returned the new block's
// memory); an address inside a live block with its generation is live.
func TestLiveInsideLaterBlock(t *testing.T) {
	p, _ := newTestPool(t, Options{})
	a := mustAlloc(t, p, 256, 1)
	b := mustAlloc(t, p, 256, 1)
	if b.Off != a.Off+256 {
		t.Fatalf("b at %d, a at %d: the layout this test needs changed", b.Off, a.Off)
	}
	for _, x := range []Block{a, b} {
		if err := p.Free(x.Addr, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := mustAlloc(t, p, 512, 1)
	if c.Off != a.Off {
		t.Fatalf("c at %d, want a's offset %d (coalesced reuse)", c.Off, a.Off)
	}
	if p.Live(b.Addr, b.Gen) || p.Live(a.Addr, a.Gen) {
		t.Error("a freed block inside a later one reported live")
	}
	if !p.Live(c.Addr+300, c.Gen) {
		t.Error("an address inside a live block with its generation reported dead")
	}
}

// TestFreedSpan: a span that starts in a live block and runs on into freed
// memory is freed memory (only its first byte was checked, and collectives
// on it read and wrote what a later Alloc hands out; found by review); one
// inside live blocks, across two of them, is not.
func TestFreedSpan(t *testing.T) {
	p, _ := newTestPool(t, Options{MinSegment: 64 << 10})
	a := mustAlloc(t, p, 256, 1)
	b := mustAlloc(t, p, 256, 1)
	c := mustAlloc(t, p, 256, 1)
	if b.Addr != a.Addr+256 || c.Addr != b.Addr+256 {
		t.Fatalf("blocks at %#x %#x %#x: the layout this test needs changed", a.Addr, b.Addr, c.Addr)
	}
	if p.Freed(a.Addr, 768) {
		t.Error("a span over three live blocks reported freed")
	}
	if err := p.Free(b.Addr, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		addr  uint64
		n     int64
		freed bool
	}{{a.Addr, 256, false}, {a.Addr, 257, true}, {a.Addr, 768, true}, {c.Addr, 256, false}, {a.Addr + 255, 2, true}} {
		if got := p.Freed(s.addr, s.n); got != s.freed {
			t.Errorf("Freed(%#x, %d) = %t, want %t", s.addr, s.n, got, s.freed)
		}
	}
}
