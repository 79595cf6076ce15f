package symmem

import (
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce/reducetest"
)

// Test data: every rank can compute every rank's input from (case, rank),
// so each child checks its result against a serial reference on its own.
// Floats are multiples of 1/4 in [-8, 8] (exact in every float type, and so
// are their sums over <= 8 ranks); integers lie in [-1000, 1000].

var testDTypes = []coll.DType{coll.Float32, coll.Float64, coll.BFloat16, coll.Float16, coll.Int32, coll.Int64}
var testOps = []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max}

func mix(x uint64) uint64 { // splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func isInt(dt coll.DType) bool { return dt == coll.Int32 || dt == coll.Int64 }

// value is element i of rank r's input in case c.
func value(dt coll.DType, c uint64, r, i int) float64 {
	h := mix(c*1_000_003 + uint64(r)*7_919 + uint64(i)*104_729 + 1)
	if isInt(dt) {
		return float64(int64(h%2001) - 1000)
	}
	return float64(int64(h%65)-32) / 4
}

var put, get = reducetest.Put, reducetest.Get

// fill writes count elements of rank r's input of case c, starting at
// element first of that input, into b.
func fill(b []byte, dt coll.DType, c uint64, r, first, count int) {
	for i := range count {
		put(b, dt, i, value(dt, c, r, first+i))
	}
}

// reduced is the reference reduction of element i over n ranks.
func reduced(dt coll.DType, op coll.ReduceOp, c uint64, n, i int) float64 {
	acc := value(dt, c, 0, i)
	for r := 1; r < n; r++ {
		v := value(dt, c, r, i)
		switch op {
		case coll.Sum, coll.Avg:
			acc += v
		case coll.Min:
			acc = math.Min(acc, v)
		case coll.Max:
			acc = math.Max(acc, v)
		}
	}
	if op == coll.Avg {
		if isInt(dt) {
			return math.Trunc(acc / float64(n))
		}
		return acc / float64(n)
	}
	return acc
}

// tolerance for op on dt: exact except for float averages.
func tolerance(dt coll.DType, op coll.ReduceOp, want float64) float64 {
	if op != coll.Avg || isInt(dt) {
		return 0
	}
	m := math.Max(1, math.Abs(want))
	switch dt {
	case coll.BFloat16:
		return 1e-2 * m
	case coll.Float16:
		return 1e-3 * m
	case coll.Float32:
		return 1e-5 * m
	}
	return 1e-12 * m
}

// check compares count elements of b with want(i) and reports the first
// difference.
func check(what string, b []byte, dt coll.DType, op coll.ReduceOp, count int, want func(i int) float64) error {
	for i := range count {
		got, w := get(b, dt, i), want(i)
		if math.Abs(got-w) > tolerance(dt, op, w) {
			return fmt.Errorf("%s: element %d of %d = %v, want %v", what, i, count, got, w)
		}
	}
	return nil
}
