package reduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/reduce/internal/asmgen"
)

// The vector kernels must give the pure-Go loops' bytes exactly, NaN
// payloads included. These tests skip where the CPU has no kernels.

func needVec(t *testing.T, dt coll.DType) {
	t.Helper()
	if vecNative(dt) == nil && (dt.Size() != 2 || vecHalf(dt == coll.BFloat16) == nil) {
		t.Skipf("no vector kernels for %v on this CPU/platform: the pure-Go loops run", dt)
	}
}

func TestKernelsGolden(t *testing.T) {
	have, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, asmgen.AMD64()) {
		t.Fatal("kernels_amd64.s differs from internal/asmgen's output: run go generate ./reduce")
	}
}

// specialBits are edge values of each dtype as bit patterns: zeros, ones,
// denormals, extremes, infinities, quiet and signalling NaNs of both signs
// with different payloads.
func specialBits(dt coll.DType) []uint64 {
	switch dt {
	case coll.Float32:
		return []uint64{0, 0x80000000, 0x3f800000, 0xbf800000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff,
			0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7fc12345, 0x7f800001, 0xffa00000, 0x33800000, 0x3f800001}
	case coll.Float64:
		return []uint64{0, 1 << 63, 0x3ff0000000000000, 0xbff0000000000000, 1, 0x800fffffffffffff, 0x7fefffffffffffff,
			0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000123, 0x7ff0000000000001, 0x3ff0000000000001}
	case coll.BFloat16:
		return []uint64{0, 0x8000, 0x3f80, 0xbf80, 1, 0x807f, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0xffa5, 0x3b80, 0x0080}
	case coll.Float16:
		return []uint64{0, 0x8000, 0x3c00, 0xbc00, 1, 0x83ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01, 0xfd55, 0x1400, 0x0400}
	case coll.Int8, coll.Uint8:
		return []uint64{0, 1, 0x7f, 0x80, 0xff, 0xfe}
	case coll.Int32:
		return []uint64{0, 1, 0x7fffffff, 0x80000000, 0xffffffff}
	default:
		return []uint64{0, 1, 1<<63 - 1, 1 << 63, 1<<64 - 1}
	}
}

// mixedBuf holds n elements: random values of the kind randBuf makes, raw
// random bit patterns and specials.
func mixedBuf(r *rand.Rand, dt coll.DType, n int) []byte {
	b := randBuf(r, dt, n, true)
	sp := specialBits(dt)
	for i := 0; i < n; i++ {
		var v uint64
		switch r.IntN(4) {
		case 0:
			continue
		case 1:
			v = r.Uint64()
		default:
			v = sp[r.IntN(len(sp))]
		}
		putBits(b, dt, i, v)
	}
	return b
}

func putBits(b []byte, dt coll.DType, i int, v uint64) {
	switch dt.Size() {
	case 1:
		b[i] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

// both runs ReduceN-style reduction (with dst as the first source when acc)
// and Finish with the vector kernels and with the pure-Go loops on copies of
// the same inputs, and fails unless the bytes are identical.
func both(t *testing.T, name string, dst []byte, srcs [][]byte, dt coll.DType, op coll.ReduceOp, acc bool) {
	t.Helper()
	vd := append(make([]byte, 0, len(dst)+1), dst...)
	sd := append([]byte(nil), dst...)
	vs, ss := srcs, srcs
	if acc {
		vs, ss = append([][]byte{vd}, srcs...), append([][]byte{sd}, srcs...)
	}
	run(vd, vs, dt, op, true)
	run(sd, ss, dt, op, false)
	if op == coll.Avg {
		finishAvg(vd, dt, len(srcs)+1, true)
		finishAvg(sd, dt, len(srcs)+1, false)
	}
	sz := dt.Size()
	for i := 0; i < len(sd); i += sz {
		if !bytes.Equal(vd[i:i+sz], sd[i:i+sz]) {
			in := ""
			for _, s := range srcs {
				in += fmt.Sprintf(" % x", s[i:i+sz])
			}
			t.Fatalf("%s: element %d: vector % x, scalar % x (dst % x, sources%s)", name, i/sz, vd[i:i+sz], sd[i:i+sz], dst[i:i+sz], in)
		}
	}
}

// offset returns a copy of b starting off bytes past a 64-byte boundary.
func offset(b []byte, off int) []byte {
	m := make([]byte, len(b)+128)
	s := int(hostmem.Addr(m) % 64)
	m = m[64-s+off:][:len(b)]
	copy(m, b)
	return m
}

// TestVectorMatchesScalar: every dtype and op, 1 to 5 sources, every length
// 0..67 (tails around the 64-byte chunks) and a few multi-block lengths,
// element-aligned and byte-misaligned slices.
func TestVectorMatchesScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var lengths []int
	for n := range 68 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1000, 2051, 5003)
	for _, dt := range coll.DTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			needVec(t, dt)
			for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max} {
				for _, k := range []int{1, 2, 3, 5} {
					for _, n := range lengths {
						off := r.IntN(4) * dt.Size() // element-aligned, not chunk-aligned
						if n%3 == 0 {
							off = 1 // misaligned: the block copies
						}
						dst := offset(mixedBuf(r, dt, n), off)
						srcs := make([][]byte, k)
						for i := range srcs {
							srcs[i] = offset(mixedBuf(r, dt, n), off)
						}
						name := fmt.Sprintf("%v k=%d n=%d off=%d", op, k, n, off)
						both(t, name+" accumulating", dst, srcs, dt, op, true)
						both(t, name+" ReduceN", dst, srcs, dt, op, false)
					}
				}
			}
		})
	}
}

// TestVectorHalvesExhaustive pairs every 16-bit value with each of a sample
// of the other operands (specials and random patterns), for every op and 1
// to 4 sources: each kernel shape (sum2, widen2+narrowAdd, widenAdd,
// widen/narrow, min/max, the division of Avg) sees every input class.
func TestVectorHalvesExhaustive(t *testing.T) {
	for _, dt := range []coll.DType{coll.BFloat16, coll.Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			needVec(t, dt)
			r := rand.New(rand.NewPCG(13, uint64(dt)))
			sample := specialBits(dt)
			for len(sample) < 40 {
				sample = append(sample, uint64(r.Uint32()&0xffff))
			}
			n := len(sample) << 16
			// x: all values, repeated; y_j: one sample value per 65536,
			// rotated per source so each source brings different values.
			x := make([]byte, 2*n)
			ys := make([][]byte, 3)
			for i := range ys {
				ys[i] = make([]byte, 2*n)
			}
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint16(x[2*i:], uint16(i))
				for j, y := range ys {
					binary.LittleEndian.PutUint16(y[2*i:], uint16(sample[(i>>16+7*j)%len(sample)]))
				}
			}
			for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max} {
				for k := 0; k <= 3; k++ {
					name := fmt.Sprintf("%v k=%d", op, k+1)
					both(t, name+" x first", make([]byte, len(x)), append([][]byte{x}, ys[:k]...), dt, op, false)
					if k > 0 {
						both(t, name+" x last", ys[0], append(ys[1:k], x), dt, op, true)
					}
				}
			}
		})
	}
}

// TestVectorConversions checks the widen and narrow kernels alone: widen on
// every 16-bit value, narrow on a stride over all float32 bit patterns plus
// every exact tie between neighbouring 16-bit values (both signs), against
// BF16ToF32/F16ToF32 and F32ToBF16/F32ToF16.
func TestVectorConversions(t *testing.T) {
	for _, dt := range []coll.DType{coll.BFloat16, coll.Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			needVec(t, dt)
			bf := dt == coll.BFloat16
			k := vecHalf(bf)
			to32, to16 := F16ToF32, F32ToF16
			if bf {
				to32, to16 = BF16ToF32, F32ToBF16
			}
			all := make([]uint16, 1<<16)
			for i := range all {
				all[i] = uint16(i)
			}
			wide := make([]float32, len(all))
			k.widen(p0(wide), p0(all), len(all)/halfChunk)
			quieted := 0
			for i, h := range all {
				got, want := math.Float32bits(wide[i]), math.Float32bits(to32(h))
				if got != want && !(isSNaN32(want) && got == want|0x400000) {
					t.Fatalf("widen(%#04x) = %#08x, want %#08x", h, got, want)
				}
				if got != want {
					quieted++
				}
			}
			t.Logf("widen: %d signalling NaNs came back quieted", quieted)
			var fs []float32
			for b := uint64(0); b < 1<<32; b += 4093 {
				fs = append(fs, math.Float32frombits(uint32(b)))
			}
			for h := uint16(0); h < 0x7c00; h++ { // ties: halfway to the next value up
				lo, hi := float64(to32(h)), float64(to32(h+1))
				if math.IsInf(hi, 0) || math.IsNaN(hi) {
					break
				}
				m := float32((lo + hi) / 2)
				fs = append(fs, m, -m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e30))
			}
			fs = append(fs, make([]float32, (halfChunk-len(fs)%halfChunk)%halfChunk)...)
			out := make([]uint16, len(fs))
			k.narrow(p0(out), p0(fs), len(fs)/halfChunk)
			for i, f := range fs {
				if want := to16(f); out[i] != want {
					t.Fatalf("narrow(%#08x) = %#04x, want %#04x", math.Float32bits(f), out[i], want)
				}
			}
		})
	}
}

// isSNaN32: a signalling float32 NaN (quiet bit clear), which the F16C
// conversion (vcvtph2ps) quiets where F16ToF32 keeps it; every use of a widened value
// (an add, or narrowing back) quiets it anyway, as TestVectorHalvesExhaustive
// checks on the results.
func isSNaN32(b uint32) bool { return b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 && b&0x400000 == 0 }
