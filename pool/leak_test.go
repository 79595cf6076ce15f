package pool

import (
	"context"
	"testing"
)

// TestNoLeaks: 10 000 alloc/free/scope cycles (with fenced frees, new
// segments and trims along the way) on two ranks, then Trim: no segments,
// no registrations, no bookkeeping entries, nothing pending in the exchange.
func TestNoLeaks(t *testing.T) {
	ctx := context.Background()
	const cycles = 10000
	rs := newRanks(t, 2, Options{MinSegment: 64 << 10}, "world", "tp")
	runRanks(2, func(r int) {
		rk := rs[r]
		p := rk.p
		var fences []*fence
		for i := range cycles {
			s, err := p.OpenScope(rk.gid[i%2])
			if err != nil {
				t.Error(err)
				return
			}
			var bs []Block
			for j := range 1 + i%3 {
				size := int64(100 + (i*7+j*13)%5000)
				if i%97 == 0 && j == 0 {
					size = 100<<10 + int64(i) // a segment of its own
				}
				b, err := p.Alloc(size, 1<<(j*3))
				if err != nil {
					t.Error(err)
					return
				}
				bs = append(bs, b)
			}
			if err := s.End(ctx); err != nil {
				t.Error(err)
				return
			}
			for j, b := range bs {
				var f Fence
				if j == 1 {
					fn := after(3)
					fences = append(fences, fn)
					f = fn
				}
				if err := p.Free(b.Addr, f); err != nil {
					t.Error(err)
					return
				}
			}
			if i%1000 == 999 {
				for _, f := range fences {
					f.done.Store(true)
				}
				fences = nil
				if err := p.Trim(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
		for _, f := range fences {
			f.done.Store(true)
		}
		if err := p.Trim(ctx); err != nil {
			t.Error(err)
			return
		}
		if c := p.counts(); c != (counts{Groups: 2}) {
			t.Errorf("rank %d after Trim: %+v, want only the 2 groups", r, c)
		}
		if st := p.Stats(); st.Reserved != 0 || st.InUse != 0 || st.Pending != 0 || st.Segments != 0 ||
			st.Groups[0].Registered != 0 || st.Groups[1].Registered != 0 {
			t.Errorf("rank %d stats %+v", r, st)
		}
		for _, m := range rk.m {
			if m.nRegistered() != 0 {
				t.Errorf("rank %d: %d segments still registered with %s", r, m.nRegistered(), m.name)
			}
		}
		if rk.prov.nLive() != 0 || rk.prov.created < 10 { // trims and big blocks forced new segments
			t.Errorf("rank %d: %d live segments of %d created", r, rk.prov.nLive(), rk.prov.created)
		}
		for _, id := range rk.gid {
			if err := p.RemoveGroup(ctx, id); err != nil {
				t.Error(err)
			}
		}
		if c := p.counts(); c != (counts{}) {
			t.Errorf("rank %d after RemoveGroup: %+v", r, c)
		}
	})
	for _, m := range rs[0].m {
		if n := m.h.pending(); n != 0 {
			t.Errorf("%d exchange rounds left in the fake hub", n)
		}
	}
}
