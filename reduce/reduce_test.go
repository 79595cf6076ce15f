package reduce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symmem/symmem/coll"
)

// The reference works element by element on little-endian bytes with
// encoding/binary: independent of the typed views and blocking under test.

func get(b []byte, dt coll.DType, i int) float64 {
	switch dt {
	case coll.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case coll.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case coll.BFloat16:
		return float64(BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case coll.Float16:
		return float64(F16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	panic("float only")
}

func getInt(b []byte, dt coll.DType, i int) int64 {
	switch dt {
	case coll.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case coll.Int64:
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	case coll.Int8:
		return int64(int8(b[i]))
	case coll.Uint8:
		return int64(b[i])
	}
	panic("int only")
}

func isFloat(dt coll.DType) bool {
	return dt == coll.Float32 || dt == coll.Float64 || dt == coll.BFloat16 || dt == coll.Float16
}

// refReduce returns the expected bytes of op over vals (each a buffer) for
// one call: 16-bit floats accumulate in float32 and round once; float32 in
// float32; ints wrap at their width.
func refReduce(vals [][]byte, dt coll.DType, op coll.ReduceOp) []byte {
	n := len(vals[0]) / dt.Size()
	out := make([]byte, len(vals[0]))
	for i := 0; i < n; i++ {
		if isFloat(dt) {
			acc := get(vals[0], dt, i)
			if dt != coll.Float64 {
				acc = float64(float32(acc))
			}
			for _, v := range vals[1:] {
				x := get(v, dt, i)
				switch op {
				case coll.Sum, coll.Avg:
					acc += x
					if dt != coll.Float64 {
						acc = float64(float32(acc))
					}
				case coll.Min:
					if x < acc || math.IsNaN(x) {
						acc = x
					}
				case coll.Max:
					if x > acc || math.IsNaN(x) {
						acc = x
					}
				}
			}
			switch dt {
			case coll.Float32:
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(acc)))
			case coll.Float64:
				binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(acc))
			case coll.BFloat16:
				binary.LittleEndian.PutUint16(out[2*i:], F32ToBF16(float32(acc)))
			case coll.Float16:
				binary.LittleEndian.PutUint16(out[2*i:], F32ToF16(float32(acc)))
			}
			continue
		}
		acc := getInt(vals[0], dt, i)
		for _, v := range vals[1:] {
			x := getInt(v, dt, i)
			switch op {
			case coll.Sum, coll.Avg:
				acc += x
			case coll.Min:
				acc = min(acc, x)
			case coll.Max:
				acc = max(acc, x)
			}
		}
		switch dt {
		case coll.Int32:
			binary.LittleEndian.PutUint32(out[4*i:], uint32(acc))
		case coll.Int64:
			binary.LittleEndian.PutUint64(out[8*i:], uint64(acc))
		default:
			out[i] = byte(acc)
		}
	}
	return out
}

// randBuf fills n elements with values that exercise each type: small
// integers and fractions for floats (so sums are exact in many but not all
// places), full-range bits for ints, and a sprinkling of NaN/Inf for floats.
func randBuf(r *rand.Rand, dt coll.DType, n int, specials bool) []byte {
	b := make([]byte, n*dt.Size())
	for i := 0; i < n; i++ {
		f := (r.Float64() - 0.5) * 200
		if specials && r.IntN(200) == 0 {
			f = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1e-30}[r.IntN(6)]
		}
		switch dt {
		case coll.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
		case coll.Float64:
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(f))
		case coll.BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(float32(f)))
		case coll.Float16:
			binary.LittleEndian.PutUint16(b[2*i:], F32ToF16(float32(f)))
		case coll.Int32:
			binary.LittleEndian.PutUint32(b[4*i:], r.Uint32())
		case coll.Int64:
			binary.LittleEndian.PutUint64(b[8*i:], r.Uint64())
		default:
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

// misalign returns a copy of b starting one byte past an aligned address.
func misalign(b []byte) []byte {
	m := make([]byte, len(b)+1)[1:]
	copy(m, b)
	return m
}

func TestReduceMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	counts := []int{0, 1, 7, 33, 1000, 2048, 4099, 9000}
	for _, dt := range coll.DTypes() {
		for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max} {
			for _, k := range []int{1, 2, 3, 5, 8} {
				for _, n := range counts {
					for _, mis := range []bool{false, true} {
						name := fmt.Sprintf("%v/%v/k=%d/n=%d/misaligned=%v", dt, op, k, n, mis)
						dst0 := randBuf(r, dt, n, true)
						srcs := make([][]byte, k)
						for j := range srcs {
							srcs[j] = randBuf(r, dt, n, true)
							if mis && j%2 == 0 {
								srcs[j] = misalign(srcs[j])
							}
						}
						// ReduceN with dst as the first source: dst op= all sources.
						dst := append([]byte(nil), dst0...)
						if mis {
							dst = misalign(dst)
						}
						if err := ReduceN(dst, append([][]byte{dst}, srcs...), dt, op); err != nil {
							t.Fatalf("%s ReduceN accumulating: %v", name, err)
						}
						want := refReduce(append([][]byte{dst0}, srcs...), dt, op)
						cmp(t, name+" ReduceN accumulating", dt, dst, want)
						// ReduceN: dst = op over sources.
						if err := ReduceN(dst, srcs, dt, op); err != nil {
							t.Fatalf("%s ReduceN: %v", name, err)
						}
						cmp(t, name+" ReduceN", dt, dst, refReduce(srcs, dt, op))
						// ReduceN in place: dst is srcs[0].
						in := append([]byte(nil), srcs[0]...)
						want = refReduce(srcs, dt, op)
						srcs[0] = in
						if err := ReduceN(in, srcs, dt, op); err != nil {
							t.Fatal(err)
						}
						cmp(t, name+" ReduceN in place", dt, in, want)
						// ReduceN with dst aliasing the last source (in-place
						// reduce-scatter on the highest rank) and with dst
						// passed as a second source too.
						last := append([]byte(nil), srcs[k-1]...)
						srcs[k-1] = last
						want = refReduce(srcs, dt, op)
						if err := ReduceN(last, srcs, dt, op); err != nil {
							t.Fatal(err)
						}
						cmp(t, name+" ReduceN aliasing the last source", dt, last, want)
						d2 := append([]byte(nil), dst0...)
						want = refReduce(append([][]byte{dst0, dst0}, srcs[1:]...), dt, op)
						if err := ReduceN(d2, append([][]byte{d2, d2}, srcs[1:]...), dt, op); err != nil {
							t.Fatal(err)
						}
						cmp(t, name+" ReduceN with dst as two sources", dt, d2, want)
					}
				}
			}
		}
	}
}

// TestPairwise checks that k two-source calls equal the pairwise reference
// (for 16-bit floats this rounds after every step, unlike one k-source call).
func TestPairwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range coll.DTypes() {
		dst := randBuf(r, dt, 5000, false)
		want := append([]byte(nil), dst...)
		for range 3 {
			src := randBuf(r, dt, 5000, false)
			want = refReduce([][]byte{want, src}, dt, coll.Sum)
			if err := ReduceN(dst, [][]byte{dst, src}, dt, coll.Sum); err != nil {
				t.Fatal(err)
			}
		}
		cmp(t, "pairwise "+dt.String(), dt, dst, want)
	}
}

func TestOneRoundingForHalves(t *testing.T) {
	// 1 + 3 * 2^-11 in float16: pairwise each step rounds the 2^-11 away
	// (tie to even), one-pass keeps it: 1 + 3*2^-11 rounds to 1 + 2^-9.
	one := F32ToF16(1)
	tiny := F32ToF16(1.0 / 2048)
	b := func(h uint16) []byte { return binary.LittleEndian.AppendUint16(nil, h) }
	dst := b(one)
	if err := ReduceN(dst, [][]byte{dst, b(tiny), b(tiny), b(tiny)}, coll.Float16, coll.Sum); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint16(dst); got != 0x3c02 {
		t.Fatalf("one-pass fp16 sum = %#04x (%v), want 0x3c02", got, F16ToF32(got))
	}
}

func TestFinish(t *testing.T) {
	f32 := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		dt   coll.DType
		op   coll.ReduceOp
		n    int
		in   []byte
		want []byte
	}{
		{"f32 avg", coll.Float32, coll.Avg, 4, f32(4, -2, 1), f32(1, -0.5, 0.25)},
		{"f32 sum untouched", coll.Float32, coll.Sum, 4, f32(4, -2), f32(4, -2)},
		{"bf16 avg", coll.BFloat16, coll.Avg, 3, binary.LittleEndian.AppendUint16(nil, F32ToBF16(3)),
			binary.LittleEndian.AppendUint16(nil, F32ToBF16(1))},
		{"f16 avg", coll.Float16, coll.Avg, 3, binary.LittleEndian.AppendUint16(nil, F32ToF16(1)),
			binary.LittleEndian.AppendUint16(nil, F32ToF16(1.0/3))},
		{"int32 avg truncates", coll.Int32, coll.Avg, 2, binary.LittleEndian.AppendUint32(nil, uint32(0xfffffffd)),
			binary.LittleEndian.AppendUint32(nil, uint32(0xffffffff))}, // -3/2 = -1
		{"int8 avg n>127", coll.Int8, coll.Avg, 200, []byte{0x80}, []byte{0}},
		{"uint8 avg", coll.Uint8, coll.Avg, 3, []byte{200, 7}, []byte{66, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mis := range []bool{false, true} {
				b := append([]byte(nil), tc.in...)
				if mis {
					b = misalign(b)
				}
				if err := Finish(b, tc.dt, tc.op, tc.n); err != nil {
					t.Fatal(err)
				}
				cmp(t, tc.name, tc.dt, b, tc.want)
			}
		})
	}
	// A large misaligned buffer goes through the block path.
	r := rand.New(rand.NewPCG(5, 6))
	big := randBuf(r, coll.Float64, 5000, false)
	want := make([]byte, len(big))
	for i := 0; i < 5000; i++ {
		binary.LittleEndian.PutUint64(want[8*i:], math.Float64bits(get(big, coll.Float64, i)/3))
	}
	mb := misalign(big)
	if err := Finish(mb, coll.Float64, coll.Avg, 3); err != nil {
		t.Fatal(err)
	}
	cmp(t, "big misaligned f64", coll.Float64, mb, want)
}

func TestIntWraps(t *testing.T) {
	dst := binary.LittleEndian.AppendUint32(nil, math.MaxInt32)
	if err := ReduceN(dst, [][]byte{dst, binary.LittleEndian.AppendUint32(nil, 1)}, coll.Int32, coll.Sum); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.LittleEndian.Uint32(dst)); got != math.MinInt32 {
		t.Fatalf("MaxInt32+1 = %d, want wrap to MinInt32", got)
	}
}

func TestErrors(t *testing.T) {
	b8 := make([]byte, 8)
	for _, tc := range []struct {
		name string
		f    func() error
		want error
	}{
		{"length mismatch", func() error { return ReduceN(b8, [][]byte{make([]byte, 4)}, coll.Float32, coll.Sum) }, ErrLength},
		{"ragged", func() error { return ReduceN(b8[:6], [][]byte{make([]byte, 6)}, coll.Float32, coll.Sum) }, ErrLength},
		{"ragged finish", func() error { return Finish(b8[:7], coll.Int64, coll.Avg, 2) }, ErrLength},
		{"finish n=0", func() error { return Finish(b8, coll.Float32, coll.Avg, 0) }, ErrLength},
		{"dtype", func() error { return ReduceN(b8, [][]byte{b8}, coll.DType(99), coll.Sum) }, ErrDType},
		{"op", func() error { return ReduceN(b8, [][]byte{b8}, coll.Float32, coll.ReduceOp(7)) }, ErrOp},
		{"no sources", func() error { return ReduceN(b8, nil, coll.Float32, coll.Sum) }, ErrLength},
		{"second source short", func() error { return ReduceN(b8, [][]byte{b8, b8[:4]}, coll.Float32, coll.Sum) }, ErrLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range b8 {
				b8[i] = byte(i)
			}
			err := tc.f()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			for i := range b8 {
				if b8[i] != byte(i) {
					t.Fatal("dst modified on error")
				}
			}
			t.Log(err)
		})
	}
}

func cmp(t *testing.T, name string, dt coll.DType, got, want []byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d bytes, want %d", name, len(got), len(want))
	}
	sz := dt.Size()
	for i := 0; i < len(got); i += sz {
		g, w := got[i:i+sz], want[i:i+sz]
		if string(g) == string(w) {
			continue
		}
		if isFloat(dt) && math.IsNaN(get(g, dt, 0)) && math.IsNaN(get(w, dt, 0)) {
			continue
		}
		t.Fatalf("%s: element %d = % x, want % x", name, i/sz, g, w)
	}
}

// TestNoAllocs: a reduction allocates nothing in steady state, for every
// kind of input the collectives pass (two and three sources, dst aliasing
// a source, 16-bit floats, Avg): the shm backend runs one per piece of a
// stage, thousands per second, and garbage there means GC cycles that
// take CPUs from the copies.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const n = 64 << 10
	for _, dt := range []coll.DType{coll.Float32, coll.BFloat16, coll.Float16, coll.Int8} {
		for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Max} {
			a, b, c, d := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
			for name, f := range map[string]func(){
				"two":      func() { ReduceN(d, [][]byte{a, b}, dt, op) },
				"three":    func() { ReduceN(d, [][]byte{a, b, c}, dt, op) },
				"in-place": func() { ReduceN(b, [][]byte{a, b}, dt, op) },
				"finish":   func() { Finish(d, dt, op, 3) },
			} {
				f()
				if got := testing.AllocsPerRun(20, f); got != 0 {
					t.Errorf("%v %v %s: %v allocations per call, want 0", dt, op, name, got)
				}
			}
		}
	}
}
