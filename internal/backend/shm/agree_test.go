package shm

import (
	"testing"

	"github.com/symmem/symmem/internal/backend/agree"
)

// linkedPads returns n ranks' pads cross-mapped in this process.
func linkedPads(t testing.TB, n int) []*pads {
	ps := make([]*pads, n)
	for r := range ps {
		p, err := newPads(n, r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.close)
		ps[r] = p
	}
	for _, p := range ps {
		for q, o := range ps {
			if q != p.me {
				p.peers[q] = o.mem
			}
		}
	}
	return ps
}

func TestRecordsCompare(t *testing.T) {
	ps := linkedPads(t, 3)
	rec := agree.Record{agree.RecCall << 56, 0, 64, 1, 2}
	for k := range uint64(4) { // both slots, twice
		for _, p := range ps {
			p.put(k, 7, rec)
		}
		for _, p := range ps {
			if d := p.compare(k); d != nil {
				t.Fatalf("call %d: equal records differ: %v", k, d)
			}
		}
	}
	odd := rec
	odd[2] = 32
	ps[0].put(4, 9, rec)
	ps[1].put(4, 9, rec)
	ps[2].put(4, 9, odd)
	for _, p := range ps {
		d := p.compare(4)
		if d == nil || d.Rank != 2 || d.Theirs != odd || d.Rank0 != rec {
			t.Fatalf("rank %d: got %+v, want rank 2 differing", p.me, d)
		}
	}
	ps[2].put(5, 10, rec) // another call position, same record
	ps[0].put(5, 11, rec)
	ps[1].put(5, 11, rec)
	if d := ps[0].compare(5); d == nil || d.Rank != 2 || d.Seq == d.Rank0Seq {
		t.Fatalf("call position not compared: %+v", d)
	}
}

// BenchmarkRecordCheck: the pad work a checked collective adds on one
// rank: publish its record, read and compare every rank's.
func BenchmarkRecordCheck(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(map[int]string{2: "ranks=2", 8: "ranks=8"}[n], func(b *testing.B) {
			ps := linkedPads(b, n)
			rec := agree.Record{agree.RecCall << 56, 0, 64, 1, 2}
			for k := range uint64(2) {
				for _, p := range ps {
					p.put(k, 1, rec)
				}
			}
			k := uint64(0)
			for b.Loop() {
				ps[0].put(k, 1, rec)
				if ps[0].compare(k) != nil {
					b.Fatal("differ")
				}
				k++
			}
		})
	}
}
