package shm_test

import (
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
	"github.com/symmem/symmem/reduce/reducetest"
)

// Test data: every rank computes every rank's input of a case from (case,
// rank, element), so it checks its own result against a serial reference.

func mix(x uint64) uint64 { // splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

var isFloat = reducetest.IsFloat

// elem is one element's value: f for floats, i for integers.
type elem struct {
	f float64
	i int64
}

// specialsOf are the float values mixed into inputs when specials is on.
var specialsOf = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0}

// value is element i of rank r's input in case c.
func value(dt coll.DType, c uint64, r, i int, specials bool) elem {
	h := mix(c*1_000_003 + uint64(r)*7_919 + uint64(i)*104_729 + 1)
	if !isFloat(dt) {
		switch dt {
		case coll.Int8:
			return elem{i: int64(int8(h))}
		case coll.Uint8:
			return elem{i: int64(uint8(h))}
		case coll.Int32:
			return elem{i: int64(int32(h))}
		}
		return elem{i: int64(h)}
	}
	if specials && h>>60 == 0 { // 1 in 16
		return elem{f: specialsOf[(h>>8)%uint64(len(specialsOf))]}
	}
	return elem{f: float64(int64(h%65)-32) / 4}
}

func put(b []byte, dt coll.DType, i int, v elem) {
	if isFloat(dt) {
		reducetest.PutFloat(b, dt, i, v.f)
		return
	}
	reducetest.PutInt(b, dt, i, v.i)
}

// wrap truncates v to dt's width (two's complement) and back.
func wrap(dt coll.DType, v int64) int64 {
	switch dt {
	case coll.Int8:
		return int64(int8(v))
	case coll.Uint8:
		return int64(uint8(v))
	case coll.Int32:
		return int64(int32(v))
	}
	return v
}

// round rounds f to dt's precision (16-bit floats and float32).
func round(dt coll.DType, f float64) float64 {
	switch dt {
	case coll.Float32:
		return float64(float32(f))
	case coll.BFloat16:
		return float64(reduce.BF16ToF32(reduce.F32ToBF16(float32(f))))
	case coll.Float16:
		return float64(reduce.F16ToF32(reduce.F32ToF16(float32(f))))
	}
	return f
}

// expect is the documented result of op over vals (ascending ranks):
// floats accumulate in float32 (float64 for float64) and round once, NaN
// propagates through min and max, integers wrap, averages divide the sum
// (integers truncating toward zero).
func expect(dt coll.DType, op coll.ReduceOp, vals []elem) elem {
	n := len(vals)
	if !isFloat(dt) {
		acc := vals[0].i
		for _, v := range vals[1:] {
			switch op {
			case coll.Sum, coll.Avg:
				acc = wrap(dt, acc+v.i)
			case coll.Min:
				acc = min(acc, v.i)
			case coll.Max:
				acc = max(acc, v.i)
			}
		}
		if op == coll.Avg {
			acc = wrap(dt, acc/int64(n))
		}
		return elem{i: acc}
	}
	f32 := dt != coll.Float64
	acc := round(dt, vals[0].f)
	for _, v := range vals[1:] {
		x := round(dt, v.f)
		switch op {
		case coll.Sum, coll.Avg:
			acc += x
			if f32 {
				acc = float64(float32(acc))
			}
		case coll.Min:
			if x < acc || x != x {
				acc = x
			}
		case coll.Max:
			if x > acc || x != x {
				acc = x
			}
		}
	}
	acc = round(dt, acc)
	if op == coll.Avg {
		if f32 {
			acc = round(dt, float64(float32(acc)/float32(n)))
		} else {
			acc /= float64(n)
		}
	}
	return elem{f: acc}
}

// same compares element i of got with want: NaN matches any NaN, and in
// min/max a zero matches a zero of either sign.
func same(dt coll.DType, op coll.ReduceOp, got []byte, i int, want elem) (string, bool) {
	w := make([]byte, dt.Size())
	put(w, dt, 0, want)
	g := got[i*dt.Size() : (i+1)*dt.Size()]
	if string(g) == string(w) {
		return "", true
	}
	if isFloat(dt) {
		gf := get(got, dt, i)
		if math.IsNaN(gf) && math.IsNaN(want.f) {
			return "", true
		}
		if (op == coll.Min || op == coll.Max) && gf == 0 && want.f == 0 {
			return "", true
		}
		return fmt.Sprintf("got %v (% x), want %v (% x)", gf, g, want.f, w), false
	}
	return fmt.Sprintf("got % x, want %d (% x)", g, want.i, w), false
}

var get = reducetest.Float
