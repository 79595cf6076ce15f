//go:build !purego

package reduce

import (
	"golang.org/x/sys/cpu"

	"github.com/symmem/symmem/coll"
)

//go:generate go run gen.go

// pinNaN: the Go loops give a sum's NaN payload as the kernels do.
const pinNaN = true

// The kernels of kernels_amd64.s (generated): AVX2, F16C for float16,
// and AVX-512BW for the two-source bfloat16 sum (what a 2-rank all-reduce
// of bfloat16 runs; the AVX2 one is bound by its instruction count).
var (
	hasAVX2     = cpu.X86.HasAVX2
	hasF16C     = cpu.X86.HasAVX2 && cpu.X86.HasF16C
	hasAVX512BW = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
)

func vecNative(dt coll.DType) *nativeKernels {
	if !hasAVX2 {
		return nil
	}
	switch dt {
	case coll.Float32:
		return &kF32
	case coll.Float64:
		return &kF64
	case coll.Int32:
		return &kI32
	case coll.Int64:
		return &kI64
	case coll.Int8:
		return &kI8
	case coll.Uint8:
		return &kU8
	}
	return nil
}

func vecHalf(bf16 bool) *halfKernels {
	switch {
	case bf16 && hasAVX512BW:
		return &kBF16Wide
	case bf16 && hasAVX2:
		return &kBF16
	case !bf16 && hasF16C:
		return &kF16
	}
	return nil
}

var (
	kF32  = nativeKernels{add: addF32, min: minF32, max: maxF32, divF32: divF32}
	kF64  = nativeKernels{add: addF64, min: minF64, max: maxF64, divF64: divF64}
	kI32  = nativeKernels{add: addI32, min: minI32, max: maxI32}
	kI64  = nativeKernels{add: addI64, min: minI64, max: maxI64}
	kI8   = nativeKernels{add: addI8, min: minI8, max: maxI8}
	kU8   = nativeKernels{add: addU8, min: minU8, max: maxU8}
	kBF16 = halfKernels{sum2: sum2BF16, widen2: widen2BF16, widenAdd: widenAddBF16, narrowAdd: narrowAddBF16, widen: widenBF16, narrow: narrowBF16,
		op2: [2]func(d, x, y *byte, chunks int){min2BF16, max2BF16}, narrowOp: [2]func(d, x, y *byte, chunks int){narrowMinBF16, narrowMaxBF16},
		widenOp: [2]func(d, x *byte, chunks int){widenMinBF16, widenMaxBF16}}
	kBF16Wide = func() halfKernels { k := kBF16; k.sum2 = sum2BF16Wide; return k }()
	kF16      = halfKernels{sum2: sum2F16, widen2: widen2F16, widenAdd: widenAddF16, narrowAdd: narrowAddF16, widen: widenF16, narrow: narrowF16,
		op2: [2]func(d, x, y *byte, chunks int){min2F16, max2F16}, narrowOp: [2]func(d, x, y *byte, chunks int){narrowMinF16, narrowMaxF16},
		widenOp: [2]func(d, x *byte, chunks int){widenMinF16, widenMaxF16}}
)

//go:noescape
func addF32(d, a, b *byte, chunks int)

//go:noescape
func minF32(d, a, b *byte, chunks int)

//go:noescape
func maxF32(d, a, b *byte, chunks int)

//go:noescape
func addF64(d, a, b *byte, chunks int)

//go:noescape
func minF64(d, a, b *byte, chunks int)

//go:noescape
func maxF64(d, a, b *byte, chunks int)

//go:noescape
func addI32(d, a, b *byte, chunks int)

//go:noescape
func minI32(d, a, b *byte, chunks int)

//go:noescape
func maxI32(d, a, b *byte, chunks int)

//go:noescape
func addI64(d, a, b *byte, chunks int)

//go:noescape
func minI64(d, a, b *byte, chunks int)

//go:noescape
func maxI64(d, a, b *byte, chunks int)

//go:noescape
func addI8(d, a, b *byte, chunks int)

//go:noescape
func minI8(d, a, b *byte, chunks int)

//go:noescape
func maxI8(d, a, b *byte, chunks int)

//go:noescape
func addU8(d, a, b *byte, chunks int)

//go:noescape
func minU8(d, a, b *byte, chunks int)

//go:noescape
func maxU8(d, a, b *byte, chunks int)

//go:noescape
func divF32(v *byte, chunks int, d float32)

//go:noescape
func divF64(v *byte, chunks int, d float64)

//go:noescape
func sum2BF16(d, x, y *byte, chunks int)

//go:noescape
func widen2BF16(a, x, y *byte, chunks int)

//go:noescape
func widenAddBF16(a, x *byte, chunks int)

//go:noescape
func narrowAddBF16(d, a, x *byte, chunks int)

//go:noescape
func widenBF16(a, x *byte, chunks int)

//go:noescape
func narrowBF16(d, a *byte, chunks int)

//go:noescape
func sum2F16(d, x, y *byte, chunks int)

//go:noescape
func widen2F16(a, x, y *byte, chunks int)

//go:noescape
func widenAddF16(a, x *byte, chunks int)

//go:noescape
func narrowAddF16(d, a, x *byte, chunks int)

//go:noescape
func widenF16(a, x *byte, chunks int)

//go:noescape
func narrowF16(d, a *byte, chunks int)

//go:noescape
func min2BF16(d, x, y *byte, chunks int)

//go:noescape
func widenMinBF16(a, x *byte, chunks int)

//go:noescape
func narrowMinBF16(d, a, x *byte, chunks int)

//go:noescape
func max2BF16(d, x, y *byte, chunks int)

//go:noescape
func widenMaxBF16(a, x *byte, chunks int)

//go:noescape
func narrowMaxBF16(d, a, x *byte, chunks int)

//go:noescape
func min2F16(d, x, y *byte, chunks int)

//go:noescape
func widenMinF16(a, x *byte, chunks int)

//go:noescape
func narrowMinF16(d, a, x *byte, chunks int)

//go:noescape
func max2F16(d, x, y *byte, chunks int)

//go:noescape
func widenMaxF16(a, x *byte, chunks int)

//go:noescape
func narrowMaxF16(d, a, x *byte, chunks int)

//go:noescape
func sum2BF16Wide(d, x, y *byte, chunks int)
