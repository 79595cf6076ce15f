package reduce

import "math"

// BF16ToF32 converts a bfloat16 (the top 16 bits of a float32) exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to the nearest bfloat16, ties to even. Values
// beyond the largest bfloat16 become infinity; NaN stays NaN (quieted, sign
// and top payload bits kept).
func F32ToBF16(f float32) uint16 { return bf16FromBits(math.Float32bits(f)) }

func bf16FromBits(b uint32) uint16 {
	r := uint16((b + 0x7fff + (b>>16)&1) >> 16)
	if b&0x7fffffff > 0x7f800000 { // NaN: rounding could carry it into infinity
		r = uint16(b>>16) | 0x0040
	}
	return r
}

// F16ToF32 converts an IEEE 754 binary16 exactly (subnormals, infinities and
// NaN payloads included).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: man * 2^-24, exact in float32 (a normal float32).
		f := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(f))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	}
}

// F32ToF16 rounds a float32 to the nearest binary16, ties to even: values of
// magnitude 65520 or more become infinity, values of magnitude 2^-25 or less
// become (signed) zero, subnormal results are rounded correctly, NaN stays
// NaN (quieted, sign and top payload bits kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x477ff000: // >= 65520 (halfway to 65536) and infinity
		return sign | 0x7c00
	case a >= 0x38800000: // >= 2^-14: normal result
		r := a - (127-15)<<23
		return sign | uint16((r+0xfff+(r>>13)&1)>>13)
	}
	// Subnormal or zero result: units of 2^-24.
	e := a >> 23
	if e < 102 { // value < 2^-25 (incl. float32 subnormals and zero): rounds to 0
		return sign
	}
	m := a&0x7fffff | 0x800000 // value = m * 2^(e-150) = m * 2^-24 / 2^(126-e)
	shift := 126 - e           // 14..24
	q := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return sign | uint16(q)
}
