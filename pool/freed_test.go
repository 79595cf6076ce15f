package pool

import "testing"

// TestLiveAndFreed: a block is live until freed; a later block at the same
// address has another generation, so the old handle stays dead.
func TestLiveAndFreed(t *testing.T) {
	p, _ := newTestPool(t, Options{MinSegment: 64 << 10})
	a := mustAlloc(t, p, 1000, 1)
	if !p.Live(a.Addr, a.Gen) || p.Freed(a.Addr) || p.Freed(a.Addr+999) {
		t.Fatal("fresh block not live")
	}
	if err := p.Free(a.Addr, nil); err != nil {
		t.Fatal(err)
	}
	if p.Live(a.Addr, a.Gen) || !p.Freed(a.Addr) || !p.Freed(a.Addr+999) {
		t.Fatal("freed block still live")
	}
	b := mustAlloc(t, p, 1000, 1)
	if b.Addr != a.Addr || b.Gen == a.Gen {
		t.Fatalf("reuse: %+v after %+v", b, a)
	}
	if p.Live(a.Addr, a.Gen) || !p.Live(b.Addr, b.Gen) || p.Freed(a.Addr) {
		t.Fatal("old handle live again, or new one dead")
	}
	if p.Live(0x1000, 1) {
		t.Fatal("an address outside the pool is live")
	}
}
