package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchPool has nseg segments of 64 KiB, each holding 16 live blocks
// registered with one group, and returns 1024 addresses inside them.
func benchPool(b *testing.B, nseg int) (*Pool, []uint64, GroupID) {
	rk := newRanks(b, 1, Options{MinSegment: 64 << 10}, "world")[0]
	p := rk.p
	s, _ := p.OpenScope(rk.gid[0])
	var addrs []uint64
	for range nseg {
		if err := p.Reserve(64 << 10); err != nil {
			b.Fatal(err)
		}
	}
	for range nseg * 16 {
		blk := mustAlloc(b, p, 4000, 1)
		addrs = append(addrs, blk.Addr+100)
	}
	if err := s.End(context.Background()); err != nil {
		b.Fatal(err)
	}
	// 1024 random picks (index with i&1023), spread over all segments.
	rng := rand.New(rand.NewPCG(1, 2))
	picks := make([]uint64, 1024)
	for i := range picks {
		picks[i] = addrs[rng.IntN(len(addrs))]
	}
	return p, picks, rk.gid[0]
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			p, addrs, _ := benchPool(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := p.Lookup(addrs[i&1023]); !ok {
					b.Fatal("not found")
				}
				i++
			}
		})
	}
}

func BenchmarkLookupParallel(b *testing.B) {
	p, addrs, _ := benchPool(b, 1000)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p.Lookup(addrs[i&1023])
			i++
		}
	})
}

func BenchmarkSymmetric(b *testing.B) {
	p, addrs, gid := benchPool(b, 1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, ok := p.Symmetric(addrs[i&1023], 1000, gid); !ok {
			b.Fatal("not symmetric")
		}
		i++
	}
}

func BenchmarkScopeEndNothingNew(b *testing.B) {
	p, _, gid := benchPool(b, 10)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.OpenScope(gid)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.End(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllocFreeCached(b *testing.B) {
	p, _, _ := benchPool(b, 100)
	blk := mustAlloc(b, p, 4096, 256)
	if err := p.Free(blk.Addr, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		blk, err := p.Alloc(4096, 256)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Free(blk.Addr, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocFreeFragmented: Alloc+Free with many free fragments (every
// other block of a full pool freed), the worst case of the sorted free index.
func BenchmarkAllocFreeFragmented(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("fragments=%d", n), func(b *testing.B) {
			p, _ := newTestPool(b, Options{MinSegment: 1 << 20})
			var bs []Block
			for range 2 * n {
				bs = append(bs, mustAlloc(b, p, 4096, 1))
			}
			for i := 0; i < len(bs); i += 2 {
				if err := p.Free(bs[i].Addr, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				blk, err := p.Alloc(4096, 256)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Free(blk.Addr, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllocFreeSplit: Alloc that splits a free block, and the Free
// that coalesces it, at the front of a segment holding many blocks (the
// segment's block list is a sorted slice: splits move its tail).
func BenchmarkAllocFreeSplit(b *testing.B) {
	for _, n := range []int{100, 1000, 16000} {
		b.Run(fmt.Sprintf("blocks=%d", n), func(b *testing.B) {
			p, _ := newTestPool(b, Options{MinSegment: int64(n+1) * 4096})
			var bs []Block
			for range n + 1 {
				bs = append(bs, mustAlloc(b, p, 4096, 1))
			}
			if err := p.Free(bs[0].Addr, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				blk, err := p.Alloc(1024, 256)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.Free(blk.Addr, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
