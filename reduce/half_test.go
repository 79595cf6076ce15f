package reduce

import (
	"math"
	"sort"
	"testing"
)

// f16Value is an independent decoding of binary16 into float64.
func f16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(m, -24)
	case 31:
		if m == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

func TestF16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		want := f16Value(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, f)
			}
			back := F32ToF16(f)
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 || back&0x8000 != h&0x8000 {
				t.Fatalf("NaN %#04x round-tripped to %#04x", h, back)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, want)
		}
		if back := F32ToF16(f); back != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.IsNaN(float64(f)) {
			if back := F32ToBF16(f); back&0x7f80 != 0x7f80 || back&0x7f == 0 {
				t.Fatalf("NaN %#04x round-tripped to %#04x", h, back)
			}
			continue
		}
		if back := F32ToBF16(f); back != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestKnownVectors(t *testing.T) {
	f16 := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00}, {1e6, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{0.333251953125, 0x3555}, {1.0 / 3, 0x3555}, {0.1, 0x2e66}, {6.103515625e-05, 0x0400},
		{5.960464477539063e-08, 0x0001}, {2.9802322387695312e-08, 0x0000}, {2.98024e-08, 0x0001},
		{1.7881393432617188e-07, 0x0003}, // 3 * 2^-24
		{8.940696716308594e-08, 0x0002},  // 1.5 * 2^-24: tie -> even (2)
		{1.4901161193847656e-07, 0x0002}, // 2.5 * 2^-24: tie -> even (2)
		{1.00048828125, 0x3c00},          // 1 + 2^-11: tie -> even (1.0)
		{1.00146484375, 0x3c02},          // 1 + 3*2^-11: tie -> even (1+2^-9)
		{1e-45, 0x0000},
	}
	for _, c := range f16 {
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	bf := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80}, {-1, 0xbf80}, {math.Pi, 0x4049}, {0.1, 0x3dcd}, {3.4028235e38, 0x7f80},
		{float32(math.Inf(1)), 0x7f80}, {1.00390625, 0x3f80}, {1.01171875, 0x3f82}, {1e-40, 0x0001},
	}
	for _, c := range bf {
		if got := F32ToBF16(c.f); got != c.h {
			t.Errorf("F32ToBF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	nan := math.Float32frombits(0x7f800001) // signalling NaN whose payload is only in low bits
	if got := F32ToBF16(nan); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("F32ToBF16(sNaN) = %#04x, not a NaN", got)
	}
	if got := F32ToF16(nan); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("F32ToF16(sNaN) = %#04x, not a NaN", got)
	}
}

// refRound rounds x (finite float32, as float64) to the grid vals (the
// ascending non-negative finite values of a 16-bit format, index = bits),
// nearest, ties to the even bit pattern; overflow threshold given.
func refRound(x float64, vals []float64, overflow float64, inf uint16) uint16 {
	sign := uint16(0)
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	if x >= overflow {
		return sign | inf
	}
	i := sort.SearchFloat64s(vals, x) // vals[i] >= x
	if i < len(vals) && vals[i] == x {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	if hi == len(vals) { // between max finite and the overflow threshold
		return sign | uint16(lo)
	}
	dl, dh := x-vals[lo], vals[hi]-x
	switch {
	case dl < dh:
		return sign | uint16(lo)
	case dh < dl:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	default:
		return sign | uint16(hi)
	}
}

func TestRoundingAgainstReference(t *testing.T) {
	var f16vals, bfvals []float64
	for h := 0; h <= 0x7bff; h++ {
		f16vals = append(f16vals, f16Value(uint16(h)))
	}
	for h := 0; h <= 0x7f7f; h++ {
		bfvals = append(bfvals, float64(BF16ToF32(uint16(h))))
	}
	// Halfway between the largest finite bfloat16 and 2^128.
	bfOverflow := (float64(BF16ToF32(0x7f7f)) + math.Ldexp(1, 128)) / 2

	var probes []float32
	// Every 16-bit value, the midpoints to its neighbour, and one float32 ulp either side.
	addAround := func(v float64, next float64) {
		for _, x := range []float64{v, (v + next) / 2} {
			f := float32(x)
			probes = append(probes, f, math.Nextafter32(f, 0), math.Nextafter32(f, float32(math.Inf(1))))
		}
	}
	for i := 0; i+1 < len(f16vals); i++ {
		addAround(f16vals[i], f16vals[i+1])
	}
	for i := 0; i+1 < len(bfvals); i++ {
		addAround(bfvals[i], bfvals[i+1])
	}
	// A stride over all float32 bit patterns.
	for b := uint64(0); b < 1<<32; b += 65521 {
		probes = append(probes, math.Float32frombits(uint32(b)))
	}
	for _, f := range probes {
		for _, g := range []float32{f, -f} {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				continue
			}
			if got, want := F32ToF16(g), refRound(float64(g), f16vals, 65520, 0x7c00); got != want {
				t.Fatalf("F32ToF16(%g [%#08x]) = %#04x, want %#04x", g, math.Float32bits(g), got, want)
			}
			if got, want := F32ToBF16(g), refRound(float64(g), bfvals, bfOverflow, 0x7f80); got != want {
				t.Fatalf("F32ToBF16(%g [%#08x]) = %#04x, want %#04x", g, math.Float32bits(g), got, want)
			}
		}
	}
	t.Logf("%d probes", len(probes))
}

func TestInlinedConversionsMatch(t *testing.T) {
	// widen/narrow inline the common cases; they must agree with the
	// reference conversions on every 16-bit value and a stride of float32s.
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	got := make([]float32, len(all))
	widen(got, all, false)
	acc := make([]float32, len(all))
	widenAdd(acc, all, false)
	for i, h := range all {
		want := math.Float32bits(F16ToF32(h))
		if math.Float32bits(got[i]) != want || math.Float32bits(acc[i]) != math.Float32bits(0+F16ToF32(h)) {
			t.Fatalf("widen(%#04x) = %#08x / %v, want %#08x", h, math.Float32bits(got[i]), acc[i], want)
		}
	}
	var fs []float32
	for b := uint64(0); b < 1<<32; b += 4093 {
		fs = append(fs, math.Float32frombits(uint32(b)))
	}
	out := make([]uint16, len(fs))
	narrow(out, fs, false)
	for i, f := range fs {
		if want := F32ToF16(f); out[i] != want {
			t.Fatalf("narrow(%#08x) = %#04x, want %#04x", math.Float32bits(f), out[i], want)
		}
	}
}
