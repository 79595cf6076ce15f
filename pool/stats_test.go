package pool

import (
	"testing"
	"time"
)

// TestStatsAfterFences: Stats after sequences with fences. Before, an Alloc
// that failed waiting for a stuck fence left Peak at the size it never
// held, and Pending kept the bytes of a fence done since until the next
// Alloc or Trim.
func TestStatsAfterFences(t *testing.T) {
	p, _ := newTestPool(t, Options{Timeout: 50 * time.Millisecond})
	a := mustAlloc(t, p, 256, 1)
	b := mustAlloc(t, p, 256, 1)
	c := mustAlloc(t, p, 256, 1)
	stuck := &fence{}
	steps := []struct {
		name                 string
		do                   func() error
		fails                bool
		inUse, pending, peak int64
	}{
		{"free a with a stuck fence", func() error { return p.Free(a.Addr, stuck) }, false, 512, 256, 768},
		{"free c", func() error { return p.Free(c.Addr, nil) }, false, 256, 256, 768},
		{"free b", func() error { return p.Free(b.Addr, nil) }, false, 0, 256, 768},
		{"alloc over a's fence", func() error { _, err := p.Alloc(1024, 1); return err }, true, 0, 256, 768},
		{"a's fence completes", func() error { stuck.done.Store(true); return nil }, false, 0, 0, 768},
		{"alloc again", func() error { _, err := p.Alloc(1024, 1); return err }, false, 1024, 0, 1024},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.fails {
			t.Fatalf("%s: error %v, want failure %v", s.name, err, s.fails)
		}
		st := p.Stats()
		if st.InUse != s.inUse || st.Pending != s.pending || st.Peak != s.peak {
			t.Errorf("%s: InUse %d Pending %d Peak %d, want %d %d %d", s.name, st.InUse, st.Pending, st.Peak, s.inUse, s.pending, s.peak)
		}
	}
}
