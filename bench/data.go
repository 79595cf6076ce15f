package bench

import (
	"encoding/binary"
	"math"

	"github.com/symmem/symmem/coll"
)

// Test data is counter-based: element or word i of a stream is a pure
// function of (seed, i), so every rank can regenerate any rank's input, or
// any slice of it, without communication.

const golden = 0x9e3779b97f4a7c15

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// seedFor derives a stream seed from the run seed and coordinates.
func seedFor(base uint64, parts ...uint64) uint64 {
	s := mix(base + golden)
	for _, p := range parts {
		s = mix(s ^ (p + golden))
	}
	return s
}

// fillBytes fills dst with the byte stream of seed starting at byte offset
// off.
func fillBytes(dst []byte, seed uint64, off int64) {
	w := uint64(off / 8)
	var tmp [8]byte
	if skip := int(off % 8); skip != 0 {
		binary.LittleEndian.PutUint64(tmp[:], mix(seed+w*golden))
		n := copy(dst, tmp[skip:])
		dst = dst[n:]
		w++
	}
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], mix(seed+w*golden))
		w++
	}
	if i < len(dst) {
		binary.LittleEndian.PutUint64(tmp[:], mix(seed+w*golden))
		copy(dst[i:], tmp[:])
	}
}

// Reduction inputs are small integers, exact in every dtype, so sums of up
// to 8 ranks are exact even in bfloat16: element i of a stream is
// valueAt(seed, i) in [-32, 31] (unsigned types: [0, 63]).

func valueAt(dt coll.DType, seed uint64, i int64) int64 {
	v := int64(mix(seed+uint64(i)*golden) & 63)
	if dt == coll.Uint8 {
		return v
	}
	return v - 32
}

// fillValues writes elements [first, first+n) of a value stream into dst.
func fillValues(dst []byte, dt coll.DType, seed uint64, first int64) {
	es := dt.Size()
	n := int64(len(dst) / es)
	for i := int64(0); i < n; i++ {
		encode(dst[i*int64(es):], dt, valueAt(dt, seed, first+i))
	}
}

// encode stores the integer v (exactly representable) as dt.
func encode(b []byte, dt coll.DType, v int64) {
	switch dt {
	case coll.Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case coll.Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(float64(v)))
	case coll.BFloat16:
		binary.LittleEndian.PutUint16(b, uint16(math.Float32bits(float32(v))>>16))
	case coll.Float16:
		binary.LittleEndian.PutUint16(b, f16FromFloat32(float32(v)))
	case coll.Int32:
		binary.LittleEndian.PutUint32(b, uint32(int32(v)))
	case coll.Int64:
		binary.LittleEndian.PutUint64(b, uint64(v))
	case coll.Int8, coll.Uint8:
		b[0] = byte(v)
	}
}

func isFloat(dt coll.DType) bool {
	return dt == coll.Float32 || dt == coll.Float64 || dt == coll.BFloat16 || dt == coll.Float16
}

// decodeFloat reads a float element as float64.
func decodeFloat(b []byte, dt coll.DType) float64 {
	switch dt {
	case coll.Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case coll.Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case coll.BFloat16:
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	case coll.Float16:
		return float64(f16ToFloat32(binary.LittleEndian.Uint16(b)))
	}
	return math.NaN()
}

// decodeInt reads an integer element.
func decodeInt(b []byte, dt coll.DType) int64 {
	switch dt {
	case coll.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	case coll.Int64:
		return int64(binary.LittleEndian.Uint64(b))
	case coll.Int8:
		return int64(int8(b[0]))
	case coll.Uint8:
		return int64(b[0])
	}
	return 0
}

// wrap truncates v to the width of an integer dtype, as fixed-width
// arithmetic would.
func wrap(v int64, dt coll.DType) int64 {
	switch dt {
	case coll.Int32:
		return int64(int32(v))
	case coll.Int8:
		return int64(int8(v))
	case coll.Uint8:
		return int64(uint8(v))
	}
	return v
}

// tolerance is the relative error allowed for a reduced float element:
// sums of the test values are exact, averages round once in the dtype (and
// may be computed in float32).
func tolerance(dt coll.DType) float64 {
	switch dt {
	case coll.Float64:
		return 1e-12
	case coll.Float32:
		return 1e-6
	case coll.BFloat16:
		return 1.0 / 128
	case coll.Float16:
		return 1.0 / 1024
	}
	return 0
}

// f16FromFloat32 converts to IEEE half precision, rounding to nearest even.
func f16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b&0x7fffffff == 0:
		return sign
	case int32(b>>23&0xff) == 0xff: // inf or nan
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0: // subnormal half
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		h := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, which is still correct
	}
	return sign | uint16(h)
}

// f16ToFloat32 converts IEEE half precision to float32.
func f16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(man) / (1 << 24)
		if sign != 0 {
			return -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | man<<13)
}
