package nccl

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symmem/symmem/coll"
)

// Test data: random small integers (fresh per run through the seed), so that
// sums, averages, minima and maxima of two ranks are exact in every dtype,
// bf16 and fp16 included, and the expected result is computed independently
// of NCCL's summation order.

func genVals(seed uint64, caseID, rank int, n int64, dt coll.DType) []float64 {
	r := rand.New(rand.NewPCG(seed, uint64(caseID)<<16|uint64(rank)))
	lo, span := int64(-60), int64(121)
	if dt == coll.Uint8 {
		lo, span = 0, 121
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(lo + r.Int64N(span))
	}
	return v
}

// encode writes values (exactly representable in dt) in dt's layout.
func encode(dt coll.DType, v []float64) []byte {
	es := dt.Size()
	b := make([]byte, len(v)*es)
	le := binary.LittleEndian
	for i, x := range v {
		p := b[i*es:]
		switch dt {
		case coll.Float32:
			le.PutUint32(p, math.Float32bits(float32(x)))
		case coll.Float64:
			le.PutUint64(p, math.Float64bits(x))
		case coll.BFloat16:
			le.PutUint16(p, uint16(math.Float32bits(float32(x))>>16))
		case coll.Float16:
			le.PutUint16(p, halfBits(x))
		case coll.Int32:
			le.PutUint32(p, uint32(int32(x)))
		case coll.Int64:
			le.PutUint64(p, uint64(int64(x)))
		case coll.Int8:
			p[0] = byte(int8(x))
		case coll.Uint8:
			p[0] = byte(x)
		}
	}
	return b
}

// halfBits encodes x, an exactly representable normal float16 (or zero).
func halfBits(x float64) uint16 {
	var sign uint16
	if x < 0 {
		sign, x = 0x8000, -x
	}
	if x == 0 {
		return sign
	}
	frac, exp := math.Frexp(x) // x = frac * 2^exp, frac in [0.5, 1)
	e := exp - 1
	m := (frac*2 - 1) * 1024
	return sign | uint16(e+15)<<10 | uint16(m)
}

// combine reduces two ranks' values.
func combine(op coll.ReduceOp, a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		switch op {
		case coll.Sum:
			out[i] = a[i] + b[i]
		case coll.Avg:
			out[i] = (a[i] + b[i]) / 2
		case coll.Min:
			out[i] = math.Min(a[i], b[i])
		case coll.Max:
			out[i] = math.Max(a[i], b[i])
		}
	}
	return out
}

// firstDiff describes where got and want differ, or "" when equal.
func firstDiff(got, want []byte, es int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	bad, first := 0, -1
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad == 0 {
		return ""
	}
	e := first / es * es
	return fmt.Sprintf("%d bytes differ; first at element %d: got % x want % x", bad, first/es, got[e:e+es], want[e:e+es])
}

func TestEncodeHelpers(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {120, 0x5780}, {-59.5, 0xd370}} {
		if got := halfBits(c.x); got != c.want {
			t.Errorf("halfBits(%v) = %#04x, want %#04x", c.x, got, c.want)
		}
	}
	if b := encode(coll.BFloat16, []float64{1, -2}); b[0] != 0x80 || b[1] != 0x3f || b[3] != 0xc0 {
		t.Errorf("bf16 encode % x", b)
	}
	if d := firstDiff([]byte{1, 2, 3, 4}, []byte{1, 2, 3, 5}, 2); d == "" {
		t.Error("firstDiff missed a difference")
	}
	a, b := genVals(1, 2, 0, 100, coll.Int8), genVals(1, 2, 1, 100, coll.Int8)
	if fmt.Sprint(a) == fmt.Sprint(b) {
		t.Error("ranks got the same data")
	}
	for _, x := range combine(coll.Sum, a, b) {
		if x < -128 || x > 127 {
			t.Fatalf("int8 sum %v overflows", x)
		}
	}
}
