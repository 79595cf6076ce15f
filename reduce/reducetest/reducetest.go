// Package reducetest reads and writes single elements of collective buffers
// for tests' serial references: little-endian bytes through
// encoding/binary, independent of the typed views and kernels under test.
package reducetest

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// IsFloat reports whether dt is a floating-point type.
func IsFloat(dt coll.DType) bool {
	return dt == coll.Float32 || dt == coll.Float64 || dt == coll.BFloat16 || dt == coll.Float16
}

// Float is element i of b, a float dt.
func Float(b []byte, dt coll.DType, i int) float64 {
	switch dt {
	case coll.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	case coll.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	case coll.BFloat16:
		return float64(reduce.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	case coll.Float16:
		return float64(reduce.F16ToF32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	panic(fmt.Sprintf("reducetest.Float: %v is not a float type", dt))
}

// Int is element i of b, an integer dt.
func Int(b []byte, dt coll.DType, i int) int64 {
	switch dt {
	case coll.Int8:
		return int64(int8(b[i]))
	case coll.Uint8:
		return int64(b[i])
	case coll.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
	case coll.Int64:
		return int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	panic(fmt.Sprintf("reducetest.Int: %v is not an integer type", dt))
}

// PutFloat stores v, rounded to dt, as element i of b.
func PutFloat(b []byte, dt coll.DType, i int, v float64) {
	switch dt {
	case coll.Float32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case coll.Float64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	case coll.BFloat16:
		binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToBF16(float32(v)))
	case coll.Float16:
		binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToF16(float32(v)))
	default:
		panic(fmt.Sprintf("reducetest.PutFloat: %v is not a float type", dt))
	}
}

// PutInt stores v, truncated to dt's width, as element i of b.
func PutInt(b []byte, dt coll.DType, i int, v int64) {
	switch dt {
	case coll.Int8, coll.Uint8:
		b[i] = byte(v)
	case coll.Int32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case coll.Int64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	default:
		panic(fmt.Sprintf("reducetest.PutInt: %v is not an integer type", dt))
	}
}

// Get is element i of b as a float64, whatever dt (int64 exact to 2^53).
func Get(b []byte, dt coll.DType, i int) float64 {
	if IsFloat(dt) {
		return Float(b, dt, i)
	}
	return float64(Int(b, dt, i))
}

// Put stores v as element i of b, whatever dt.
func Put(b []byte, dt coll.DType, i int, v float64) {
	if IsFloat(dt) {
		PutFloat(b, dt, i, v)
		return
	}
	PutInt(b, dt, i, int64(v))
}
