package reduce

import (
	"math"
	"sync"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// blockBytes is the unit of cache blocking: for each block of dst, every
// source's block is folded in while dst's block stays in L1/L2, so k sources
// cost one pass over memory.
const blockBytes = 16 << 10

// stackSrcs sources or fewer (a group of up to 8 ranks) keep their
// per-source block state on the stack.
const stackSrcs = 8

type number interface {
	~int8 | ~uint8 | ~int32 | ~int64 | ~float32 | ~float64
}

// run reduces with the vector kernels where vec and the CPU has them, else
// with the pure-Go loops (the reference).
func run(dst []byte, srcs [][]byte, dt coll.DType, op coll.ReduceOp, vec bool) {
	var vk *nativeKernels
	var hk *halfKernels
	if vec {
		vk, hk = vecNative(dt), vecHalf(dt == coll.BFloat16)
	}
	switch dt {
	case coll.Float32:
		runNative[float32](dst, srcs, op, vk)
	case coll.Float64:
		runNative[float64](dst, srcs, op, vk)
	case coll.Int32:
		runNative[int32](dst, srcs, op, vk)
	case coll.Int64:
		runNative[int64](dst, srcs, op, vk)
	case coll.Int8:
		runNative[int8](dst, srcs, op, vk)
	case coll.Uint8:
		runNative[uint8](dst, srcs, op, vk)
	case coll.BFloat16:
		runHalf(dst, srcs, op, true, hk)
	case coll.Float16:
		runHalf(dst, srcs, op, false, hk)
	default:
		panic("reduce: dtype not handled: " + dt.String()) // check() rejects these first
	}
}

// viewBlock returns b as []T: a view when b is aligned, otherwise a copy in
// *scratch (allocated on first use) and copied == true.
func viewBlock[T hostmem.Word](b []byte, scratch *[]T, elemSize int) (v []T, copied bool) {
	if v, ok := hostmem.View[T](b); ok {
		return v, false
	}
	if *scratch == nil {
		*scratch = make([]T, blockBytes/elemSize)
	}
	v = (*scratch)[:len(b)/elemSize]
	copy(hostmem.AsBytes(v), b)
	return v, true
}

// runNative reduces srcs into dst, block by
// block. Up to four inputs are folded per loop, so a sum of k sources stores
// each element about k/3 times into an L1-resident block and reads every
// source byte from memory once.
//
// dst may be the same memory as a source. Only srcs[0] of an overwriting
// reduction can be read straight from dst (it is consumed first); any other
// aliased source is copied per block before dst's block is written.
//
// vk, when not nil, holds the vector kernels that replace fold.
func runNative[T number](dst []byte, srcs [][]byte, op coll.ReduceOp, vk *nativeKernels) {
	var z T
	size := sizeOf(z)
	// Per-source state on the stack for up to stackSrcs sources: a call
	// allocates nothing unless a source is misaligned or aliased.
	var aliasA [stackSrcs]bool
	var scrA, viewsA [stackSrcs][]T
	alias, scr, views := aliasA[:], scrA[:], viewsA[:]
	if len(srcs) > stackSrcs {
		alias, scr, views = make([]bool, len(srcs)), make([][]T, len(srcs)), make([][]T, len(srcs))
	}
	alias, scr, views = alias[:len(srcs)], scr[:len(srcs)], views[:len(srcs)]
	da := hostmem.Addr(dst)
	for i, src := range srcs {
		alias[i] = hostmem.Addr(src) == da && i > 0
	}
	var scrD []T
	// scr: per source, allocated only for misaligned or aliased sources.
	var in [4][]T
	for off := 0; off < len(dst); off += blockBytes {
		end := min(off+blockBytes, len(dst))
		for i, src := range srcs {
			if alias[i] {
				if scr[i] == nil {
					// A Go array of this size is page aligned: View succeeds.
					v, ok := hostmem.View[T](aliasScratch.Get().(*[blockBytes]byte)[:])
					if !ok {
						panic("reduce: pooled block is not aligned")
					}
					scr[i] = v
				}
				views[i] = scr[i][:(end-off)/size]
				copy(hostmem.AsBytes(views[i]), src[off:end])
				continue
			}
			views[i], _ = viewBlock(src[off:end], &scr[i], size)
		}
		d, dCopied := viewBlock(dst[off:end], &scrD, size)
		rest, haveD := views, false
		for len(rest) > 0 {
			k := 0
			if haveD {
				in[0], k = d, 1
			}
			for k < 4 && len(rest) > 0 {
				in[k] = rest[0]
				k++
				rest = rest[1:]
			}
			if vk != nil {
				foldVec(vk, op, d, in[:k])
			} else {
				fold(op, d, in[:k])
			}
			haveD = true
		}
		if dCopied {
			copy(dst[off:end], hostmem.AsBytes(d))
		}
	}
	for i, a := range alias {
		if a && scr[i] != nil {
			aliasScratch.Put((*[blockBytes]byte)(hostmem.AsBytes(scr[i])))
		}
	}
}

// fold sets d = op(in...), 1 <= len(in) <= 4; d may be one of the inputs.
func fold[T number](op coll.ReduceOp, d []T, in [][]T) {
	if op == coll.Sum || op == coll.Avg {
		switch len(in) {
		case 1:
			copy(d, in[0])
		case 2:
			sum2(d, in[0], in[1])
		case 3:
			sum3(d, in[0], in[1], in[2])
		case 4:
			sum4(d, in[0], in[1], in[2], in[3])
		}
		return
	}
	if &d[0] != &in[0][0] {
		copy(d, in[0])
	}
	for _, s := range in[1:] {
		apply(op, d, s)
	}
}

func sum2[T number](d, a, b []T) {
	a, b = a[:len(d)], b[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, aa, bb := d[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		dd[0] = add(aa[0], bb[0])
		dd[1] = add(aa[1], bb[1])
		dd[2] = add(aa[2], bb[2])
		dd[3] = add(aa[3], bb[3])
	}
	for ; i < len(d); i++ {
		d[i] = add(a[i], b[i])
	}
}

func sum3[T number](d, a, b, c []T) {
	a, b, c = a[:len(d)], b[:len(d)], c[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, aa, bb, cc := d[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4]
		dd[0] = add(add(aa[0], bb[0]), cc[0])
		dd[1] = add(add(aa[1], bb[1]), cc[1])
		dd[2] = add(add(aa[2], bb[2]), cc[2])
		dd[3] = add(add(aa[3], bb[3]), cc[3])
	}
	for ; i < len(d); i++ {
		d[i] = add(add(a[i], b[i]), c[i])
	}
}

func sum4[T number](d, a, b, c, e []T) {
	a, b, c, e = a[:len(d)], b[:len(d)], c[:len(d)], e[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		dd, aa, bb, cc, ee := d[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4], c[i:i+4:i+4], e[i:i+4:i+4]
		dd[0] = add(add(add(aa[0], bb[0]), cc[0]), ee[0])
		dd[1] = add(add(add(aa[1], bb[1]), cc[1]), ee[1])
		dd[2] = add(add(add(aa[2], bb[2]), cc[2]), ee[2])
		dd[3] = add(add(add(aa[3], bb[3]), cc[3]), ee[3])
	}
	for ; i < len(d); i++ {
		d[i] = add(add(add(a[i], b[i]), c[i]), e[i])
	}
}

// add returns a + b, and a's NaN (quieted) when both are NaN: x86 returns
// the first operand's NaN, and Go's compiler may order a scalar add's
// operands either way, so where vector kernels exist (pinNaN) this pins the
// payload to the source order they follow. Free for integers (a != a is
// false) and where pinNaN is false.
func add[T number](a, b T) T {
	if pinNaN && a != a {
		return a + a
	}
	return a + b
}

func sizeOf[T number](T) int {
	var z T
	return len(hostmem.AsBytes([]T{z}))
}

func apply[T number](op coll.ReduceOp, d, s []T) {
	switch op {
	case coll.Sum, coll.Avg:
		addInto(d, s)
	case coll.Min:
		minInto(d, s)
	case coll.Max:
		maxInto(d, s)
	}
}

// addInto: d += s, unrolled by 8 with bounds checks hoisted.
func addInto[T number](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+8 <= len(d); i += 8 {
		dd := d[i : i+8 : i+8]
		ss := s[i : i+8 : i+8]
		dd[0] = add(dd[0], ss[0])
		dd[1] = add(dd[1], ss[1])
		dd[2] = add(dd[2], ss[2])
		dd[3] = add(dd[3], ss[3])
		dd[4] = add(dd[4], ss[4])
		dd[5] = add(dd[5], ss[5])
		dd[6] = add(dd[6], ss[6])
		dd[7] = add(dd[7], ss[7])
	}
	for ; i < len(d); i++ {
		d[i] = add(d[i], s[i])
	}
}

// minInto: d = min(d, s); a NaN in either propagates (x != x only for NaN).
func minInto[T number](d, s []T) {
	s = s[:len(d)]
	for i, v := range s {
		if v < d[i] || v != v {
			d[i] = v
		}
	}
}

func maxInto[T number](d, s []T) {
	s = s[:len(d)]
	for i, v := range s {
		if v > d[i] || v != v {
			d[i] = v
		}
	}
}

// halfBlock is the number of 16-bit elements per block: the float32
// accumulator and a converted source fit in L1 next to the raw blocks.
const halfBlock = 2048

// aliasScratch holds the block copies of sources that alias dst (in
// place), reused across calls.
var aliasScratch = sync.Pool{New: func() any { return new([blockBytes]byte) }}

// halfScratch holds float32 blocks for runHalf and finishAvg. They would
// live on the stack, but the kernels are called through function values,
// so escape analysis moves them to the heap: 8-16 KiB per call, per
// piece of a collective's stage. A pool reuses them instead.
var halfScratch = sync.Pool{New: func() any { return new([2][halfBlock]float32) }}

func runHalf(dst []byte, srcs [][]byte, op coll.ReduceOp, bf16 bool, vk *halfKernels) {
	s := halfScratch.Get().(*[2][halfBlock]float32)
	defer halfScratch.Put(s)
	accum, tmp := &s[0], &s[1]
	var scrD []uint16
	var scrA [stackSrcs][]uint16
	var inA [stackSrcs + 1][]uint16
	scr, in := scrA[:], inA[:0] // per source (scr only for misaligned ones)
	if len(srcs) > stackSrcs {
		scr, in = make([][]uint16, len(srcs)), make([][]uint16, 0, len(srcs)+1)
	}
	scr = scr[:len(srcs)]
	for off := 0; off < len(dst); off += 2 * halfBlock {
		end := min(off+2*halfBlock, len(dst))
		n := (end - off) / 2
		a, t := accum[:n], tmp[:n]
		d, dCopied := viewBlock(dst[off:end], &scrD, 2)
		// The inputs in order; d is only written after each element's
		// inputs are read, so any of them may alias d.
		in = in[:0]
		for i, src := range srcs {
			v, _ := viewBlock(src[off:end], &scr[i], 2)
			in = append(in, v)
		}
		if vk != nil {
			halfVec(vk, op, d, in, a, t, bf16)
		} else {
			halfScalar(op, d, in, a, t, bf16)
		}
		if dCopied {
			copy(dst[off:end], hostmem.AsBytes(d))
		}
	}
}

// halfScalar sets d = op(in...) through float32 scratch a and t (len(d)),
// rounding once; any input may be d.
func halfScalar(op coll.ReduceOp, d []uint16, in [][]uint16, a, t []float32, bf16 bool) {
	sum := op == coll.Sum || op == coll.Avg
	switch {
	case sum && bf16 && len(in) == 2:
		bf16Sum2(d, in[0], in[1])
	case sum && bf16 && len(in) > 2:
		bf16Widen2(a, in[0], in[1])
		for _, v := range in[2 : len(in)-1] {
			widenAdd(a, v, true)
		}
		bf16NarrowAdd(d, a, in[len(in)-1])
	default:
		widen(a, in[0], bf16)
		for _, v := range in[1:] {
			if sum {
				widenAdd(a, v, bf16)
				continue
			}
			widen(t, v, bf16)
			apply(op, a, t)
		}
		narrow(d, a, bf16)
	}
}

// bf16Sum2: d = bf16(f32(x) + f32(y)), one rounding, no intermediate block.
func bf16Sum2(d, x, y []uint16) {
	x, y = x[:len(d)], y[:len(d)]
	for i := range d {
		d[i] = F32ToBF16(add(BF16ToF32(x[i]), BF16ToF32(y[i])))
	}
}

// bf16Widen2: a = f32(x) + f32(y).
func bf16Widen2(a []float32, x, y []uint16) {
	x, y = x[:len(a)], y[:len(a)]
	for i := range a {
		a[i] = add(BF16ToF32(x[i]), BF16ToF32(y[i]))
	}
}

// bf16NarrowAdd: d = bf16(a + f32(x)).
func bf16NarrowAdd(d []uint16, a []float32, x []uint16) {
	a, x = a[:len(d)], x[:len(d)]
	for i := range d {
		d[i] = F32ToBF16(add(a[i], BF16ToF32(x[i])))
	}
}

func widen(out []float32, in []uint16, bf16 bool) {
	in = in[:len(out)]
	if bf16 {
		for i, h := range in {
			out[i] = BF16ToF32(h)
		}
		return
	}
	for i, h := range in {
		if e := h & 0x7c00; e != 0 && e != 0x7c00 { // normal: inline F16ToF32
			out[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
			continue
		}
		out[i] = F16ToF32(h)
	}
}

// widenAdd: out += float32(in), fused so the block is not stored twice.
func widenAdd(out []float32, in []uint16, bf16 bool) {
	in = in[:len(out)]
	if bf16 {
		i := 0
		for ; i+4 <= len(out); i += 4 {
			oo, ii := out[i:i+4:i+4], in[i:i+4:i+4]
			oo[0] = add(oo[0], BF16ToF32(ii[0]))
			oo[1] = add(oo[1], BF16ToF32(ii[1]))
			oo[2] = add(oo[2], BF16ToF32(ii[2]))
			oo[3] = add(oo[3], BF16ToF32(ii[3]))
		}
		for ; i < len(out); i++ {
			out[i] = add(out[i], BF16ToF32(in[i]))
		}
		return
	}
	for i, h := range in {
		if e := h & 0x7c00; e != 0 && e != 0x7c00 { // normal: inline F16ToF32
			out[i] = add(out[i], math.Float32frombits(uint32(h&0x8000)<<16|(uint32(h&0x7fff)<<13+(127-15)<<23)))
			continue
		}
		out[i] = add(out[i], F16ToF32(h))
	}
}

func narrow(out []uint16, in []float32, bf16 bool) {
	in = in[:len(out)]
	if bf16 {
		for i, f := range in {
			out[i] = F32ToBF16(f)
		}
		return
	}
	for i, f := range in {
		b := math.Float32bits(f)
		if a := b & 0x7fffffff; a-0x38800000 < 0x477ff000-0x38800000 { // normal result: inline F32ToF16
			r := a - (127-15)<<23
			out[i] = uint16(b>>16)&0x8000 | uint16((r+0xfff+(r>>13)&1)>>13)
			continue
		}
		out[i] = F32ToF16(f)
	}
}

// finishAvg divides dst by n, with the vector kernels where vec (as run).
func finishAvg(dst []byte, dt coll.DType, n int, vec bool) {
	var k, k32 *nativeKernels
	var hk *halfKernels
	if vec {
		k, k32, hk = vecNative(dt), vecNative(coll.Float32), vecHalf(dt == coll.BFloat16)
	}
	switch dt {
	case coll.Float32:
		blocks(dst, func(v []float32) { divF(k, v, n) })
	case coll.Float64:
		blocks(dst, func(v []float64) { divF(k, v, n) })
	case coll.Int32:
		blocks(dst, func(v []int32) { divInt(v, n) })
	case coll.Int64:
		blocks(dst, func(v []int64) { divInt(v, n) })
	case coll.Int8:
		blocks(dst, func(v []int8) { divInt(v, n) })
	case coll.Uint8:
		blocks(dst, func(v []uint8) { divInt(v, n) })
	case coll.BFloat16, coll.Float16:
		bf := dt == coll.BFloat16
		s := halfScratch.Get().(*[2][halfBlock]float32)
		defer halfScratch.Put(s)
		a := &s[0]
		blocks(dst, func(v []uint16) {
			for lo := 0; lo < len(v); lo += halfBlock {
				h := v[lo:min(lo+halfBlock, len(v))]
				m := 0
				if c := len(h) / halfChunk; hk != nil && c > 0 {
					m = c * halfChunk
					hk.widen(p0(a[:m]), p0(h), c)
					divF(k32, a[:m], n)
					hk.narrow(p0(h), p0(a[:m]), c)
				}
				h, t := h[m:], a[:len(h)-m]
				widen(t, h, bf)
				divFloat(t, n)
				narrow(h, t, bf)
			}
		})
	}
}

// divF divides v by n, through k's kernel when k is not nil.
func divF[T ~float32 | ~float64](k *nativeKernels, v []T, n int) {
	if k != nil {
		divVec(k, v, n)
		return
	}
	divFloat(v, n)
}

// blocks applies f to dst viewed as []T, block by block through a copy when
// dst is misaligned.
func blocks[T number | uint16](dst []byte, f func([]T)) {
	if v, ok := hostmem.View[T](dst); ok {
		f(v)
		return
	}
	var scr []T
	size := len(hostmem.AsBytes(make([]T, 1)))
	for off := 0; off < len(dst); off += blockBytes {
		end := min(off+blockBytes, len(dst))
		v, _ := viewBlock(dst[off:end], &scr, size)
		f(v)
		copy(dst[off:end], hostmem.AsBytes(v))
	}
}

func divFloat[T ~float32 | ~float64](v []T, n int) {
	d := T(n)
	for i := range v {
		v[i] /= d
	}
}

func divInt[T ~int8 | ~uint8 | ~int32 | ~int64](v []T, n int) {
	d := int64(n)
	for i := range v {
		v[i] = T(int64(v[i]) / d)
	}
}
