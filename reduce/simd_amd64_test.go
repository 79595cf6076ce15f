//go:build !purego

package reduce

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/symmem/symmem/coll"
)

// TestSum2BF16Wide: the AVX-512 two-source bfloat16 sum gives the AVX2
// kernel's bytes (itself checked bit for bit against the scalar reference
// by TestVectorHalvesExhaustive) for every chunk count from 0 to 9 (the
// odd last chunk takes the AVX2 round) on random bits and every special
// value, and writes nothing past its chunks. On a CPU with AVX-512BW,
// vecHalf picks it, so the exhaustive tests run it too; this test keeps
// the AVX2 kernel and the odd counts covered there.
func TestSum2BF16Wide(t *testing.T) {
	if !hasAVX512BW {
		t.Skip("no AVX-512BW on this CPU: the AVX2 kernel runs")
	}
	r := rand.New(rand.NewPCG(5, 12))
	specials := specialBits(coll.BFloat16)
	for chunks := 0; chunks <= 9; chunks++ {
		for trial := range 40 {
			n := chunks*halfChunk + 8 // 8 guard elements
			x, y := make([]byte, 2*n), make([]byte, 2*n)
			for i := range n {
				vx, vy := uint16(r.Uint32()), uint16(r.Uint32())
				if trial%2 == 1 { // mostly specials against random values
					vx = uint16(specials[r.IntN(len(specials))])
				}
				binary.LittleEndian.PutUint16(x[2*i:], vx)
				binary.LittleEndian.PutUint16(y[2*i:], vy)
			}
			want, got := bytes.Repeat([]byte{0xa5}, 2*n), bytes.Repeat([]byte{0xa5}, 2*n)
			if chunks > 0 {
				sum2BF16(&want[0], &x[0], &y[0], chunks)
				sum2BF16Wide(&got[0], &x[0], &y[0], chunks)
			}
			if !bytes.Equal(got, want) {
				for i := 0; i < len(got); i += 2 {
					if !bytes.Equal(got[i:i+2], want[i:i+2]) {
						t.Fatalf("chunks %d trial %d: element %d: wide % x, AVX2 % x (x % x, y % x)", chunks, trial, i/2, got[i:i+2], want[i:i+2], x[i:i+2], y[i:i+2])
					}
				}
			}
		}
	}
}
