// Package asmgen writes reduce's amd64 kernels (kernels_amd64.s): one
// template per kernel shape, instantiated for every dtype and op, so the
// assembly stays uniform and reviewable here rather than in 1,000 lines of
// .s. reduce/gen.go runs it (go generate); reduce's golden test checks the
// committed file against it.
//
// Every kernel loops over whole chunks only (64 bytes of a native dtype, or
// 16 elements of a 16-bit float) and leaves tails to the Go caller, with
// unaligned loads and stores, AVX2 (and F16C for float16). Operand order
// follows the scalar reference element by element, so results agree bit for
// bit, NaN payloads included (x86 returns the first source's NaN).
package asmgen

import (
	"bytes"
	"fmt"
)

// A native dtype: Go name suffix and instruction suffixes.
type native struct {
	name       string // F32, F64, I32, I64, I8, U8
	float      bool
	add        string
	min, max   string // integer min/max instruction; "" for int64 (compare+blend)
	fmin, fmax string // float min/max
	cmp, blend string // float unordered compare and blend
}

var natives = []native{
	{name: "F32", float: true, add: "VADDPS", fmin: "VMINPS", fmax: "VMAXPS", cmp: "VCMPPS", blend: "VBLENDVPS"},
	{name: "F64", float: true, add: "VADDPD", fmin: "VMINPD", fmax: "VMAXPD", cmp: "VCMPPD", blend: "VBLENDVPD"},
	{name: "I32", add: "VPADDD", min: "VPMINSD", max: "VPMAXSD"},
	{name: "I64", add: "VPADDQ"},
	{name: "I8", add: "VPADDB", min: "VPMINSB", max: "VPMAXSB"},
	{name: "U8", add: "VPADDB", min: "VPMINUB", max: "VPMAXUB"},
}

type gen struct{ b bytes.Buffer }

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }

func (g *gen) text(name, args string, frame int) {
	fmt.Fprintf(&g.b, "\n// func %s(%s)\nTEXT ·%s(SB), NOSPLIT, $0-%d\n", name, args, name, frame)
}

// loop emits the chunk loop around body; CX holds the chunk count.
func (g *gen) loop(body func()) {
	g.p("TESTQ CX, CX")
	g.p("JZ done")
	fmt.Fprintf(&g.b, "loop:\n")
	body()
	g.p("DECQ CX")
	g.p("JNZ loop")
	fmt.Fprintf(&g.b, "done:\n")
	g.p("VZEROUPPER")
	g.p("RET")
}

// binary: d = a op b over chunks of 64 bytes. Element rule of the scalar
// reference: sum a+b; min/max keep a unless b is smaller/larger or NaN.
func (g *gen) binary(t native, op string) {
	name := op + t.name
	g.text(name, "d, a, b *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ a+8(FP), SI")
	g.p("MOVQ b+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.loop(func() {
		for r := 0; r < 2; r++ {
			off := 32 * r
			a, b, res, m := fmt.Sprintf("Y%d", r), fmt.Sprintf("Y%d", 2+r), fmt.Sprintf("Y%d", 4+r), fmt.Sprintf("Y%d", 6+r)
			g.p("VMOVDQU %d(SI), %s", off, a)
			switch {
			case op == "add":
				g.p("%s %d(DX), %s, %s", t.add, off, a, res)
			case t.float:
				ins := t.fmin
				if op == "max" {
					ins = t.fmax
				}
				g.p("VMOVDQU %d(DX), %s", off, b)
				g.p("%s %s, %s, %s", ins, a, b, res)     // b<a (b>a) ? b : a
				g.p("%s $3, %s, %s, %s", t.cmp, b, b, m) // b is NaN
				g.p("%s %s, %s, %s, %s", t.blend, m, b, res, res)
			case t.min != "":
				ins := t.min
				if op == "max" {
					ins = t.max
				}
				g.p("%s %d(DX), %s, %s", ins, off, a, res)
			default: // int64: compare and blend
				g.p("VMOVDQU %d(DX), %s", off, b)
				if op == "min" {
					g.p("VPCMPGTQ %s, %s, %s", b, a, m) // a > b
				} else {
					g.p("VPCMPGTQ %s, %s, %s", a, b, m) // b > a
				}
				g.p("VPBLENDVB %s, %s, %s, %s", m, b, a, res)
			}
			g.p("VMOVDQU %s, %d(DI)", res, off)
		}
		g.p("ADDQ $64, SI")
		g.p("ADDQ $64, DX")
		g.p("ADDQ $64, DI")
	})
}

func (g *gen) div(t native) {
	name, bc, div, sz, frame := "divF32", "VBROADCASTSS", "VDIVPS", "float32", 20
	if t.name == "F64" {
		name, bc, div, sz, frame = "divF64", "VBROADCASTSD", "VDIVPD", "float64", 24
	}
	g.text(name, "v *byte, chunks int, d "+sz, frame)
	g.p("MOVQ v+0(FP), DI")
	g.p("MOVQ chunks+8(FP), CX")
	g.p("%s d+16(FP), Y8", bc)
	g.loop(func() {
		g.p("VMOVDQU (DI), Y0")
		g.p("VMOVDQU 32(DI), Y1")
		g.p("%s Y8, Y0, Y0", div)
		g.p("%s Y8, Y1, Y1", div)
		g.p("VMOVDQU Y0, (DI)")
		g.p("VMOVDQU Y1, 32(DI)")
		g.p("ADDQ $64, DI")
	})
}

// A 16-bit float format.
type half struct {
	name string // BF16, F16
	bf16 bool
}

// widen loads 8 halves at mem into float32s in reg (exact).
func (g *gen) widen(h half, mem, reg string) {
	if h.bf16 {
		g.p("VPMOVZXWD %s, %s", mem, reg)
		g.p("VPSLLD $16, %s, %s", reg, reg)
		return
	}
	g.p("VCVTPH2PS %s, %s", mem, reg)
}

// widenPair loads the 16 halves at mem into float32s in lo and hi. For
// bfloat16 it interleaves them with zero words within each 128-bit lane
// (VPUNPCKLWD/VPUNPCKHWD with Y12 = 0; Y7 is the raw load): lo then holds
// elements 0-3 and 8-11, hi 4-7 and 12-15, two instructions per 8 where
// VPMOVZXWD+VPSLLD take four, and narrowPair's in-lane VPACKUSDW puts the
// elements back in order without the VPERMQ of narrow. float16 converts
// in order (VCVTPH2PS).
func (g *gen) widenPair(h half, mem, lo, hi string) {
	if !h.bf16 {
		g.p("VCVTPH2PS %s, %s", mem, lo)
		g.p("VCVTPH2PS 16%s, %s", mem, hi)
		return
	}
	g.p("VMOVDQU %s, Y7", mem)
	g.p("VPUNPCKLWD Y7, Y12, %s", lo)
	g.p("VPUNPCKHWD Y7, Y12, %s", hi)
}

// narrowPair rounds Y0, Y1 as widenPair left them to 16 halves at DI.
func (g *gen) narrowPair(h half) {
	if !h.bf16 {
		g.narrow(h)
		return
	}
	g.round("Y0")
	g.round("Y1")
	g.p("VPACKUSDW Y1, Y0, Y0") // per lane: Y0's 4 then Y1's 4, the original order
	g.p("VMOVDQU Y0, (DI)")
}

// consts loads the bfloat16 rounding constants into Y10, Y11, Y13, and
// zero into Y12 (widenPair).
func (g *gen) consts(h half) {
	if !h.bf16 {
		return
	}
	for _, c := range []struct {
		v   uint32
		reg int
	}{{0x7fff, 10}, {0x40, 11}, {1, 13}} {
		g.p("MOVL $0x%x, AX", c.v)
		g.p("VMOVD AX, X%d", c.reg)
		g.p("VPBROADCASTD X%d, Y%d", c.reg, c.reg)
	}
	g.p("VPXOR Y12, Y12, Y12")
}

// round turns the float32s in r into bfloat16 bits (one per dword) exactly
// as the scalar bf16FromBits: (b + 0x7fff + lsb) >> 16, and for NaN
// (b>>16) | 0x40. Uses Y4-Y6.
func (g *gen) round(r string) {
	g.p("VPSRLD $16, %s, Y4", r)       // b >> 16
	g.p("VPAND Y13, Y4, Y5")           // its lowest bit
	g.p("VPADDD Y10, %s, Y6", r)       // b + 0x7fff
	g.p("VPADDD Y5, Y6, Y6")           // + lsb
	g.p("VPSRLD $16, Y6, Y6")          // rounded
	g.p("VCMPPS $3, %s, %s, Y5", r, r) // NaN: unordered with itself
	g.p("VPOR Y11, Y4, Y4")            // quiet NaN, payload kept
	g.p("VPBLENDVB Y5, Y4, Y6, %s", r)
}

// narrow rounds the 16 float32s in Y0, Y1 to halves at DI (32 bytes).
func (g *gen) narrow(h half) {
	if !h.bf16 {
		g.p("VCVTPS2PH $0, Y0, (DI)") // imm 0: round to nearest even
		g.p("VCVTPS2PH $0, Y1, 16(DI)")
		return
	}
	g.round("Y0")
	g.round("Y1")
	g.p("VPACKUSDW Y1, Y0, Y0") // lanes: Y0 lo, Y1 lo, Y0 hi, Y1 hi
	g.p("VPERMQ $0xd8, Y0, Y0")
	g.p("VMOVDQU Y0, (DI)")
}

// halfKernels emits, for 16 elements per chunk:
//
//	sum2:      d = half(f32(x) + f32(y))
//	widen2:    a = f32(x) + f32(y)
//	widenAdd:  a = a + f32(x)
//	narrowAdd: d = half(a + f32(x))
//	widen:     a = f32(x)
//	narrow:    d = half(a)
func (g *gen) halfKernels(h half) {
	n := h.name
	g.text("sum2"+n, "d, x, y *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ y+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.consts(h)
	g.loop(func() {
		g.widenPair(h, "(SI)", "Y0", "Y1")
		g.widenPair(h, "(DX)", "Y2", "Y3")
		g.p("VADDPS Y2, Y0, Y0")
		g.p("VADDPS Y3, Y1, Y1")
		g.narrowPair(h)
		g.p("ADDQ $32, SI")
		g.p("ADDQ $32, DX")
		g.p("ADDQ $32, DI")
	})

	g.text("widen2"+n, "a, x, y *byte, chunks int", 32)
	g.p("MOVQ a+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ y+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.loop(func() {
		g.widen(h, "(SI)", "Y0")
		g.widen(h, "16(SI)", "Y1")
		g.widen(h, "(DX)", "Y2")
		g.widen(h, "16(DX)", "Y3")
		g.p("VADDPS Y2, Y0, Y0")
		g.p("VADDPS Y3, Y1, Y1")
		g.p("VMOVUPS Y0, (DI)")
		g.p("VMOVUPS Y1, 32(DI)")
		g.p("ADDQ $32, SI")
		g.p("ADDQ $32, DX")
		g.p("ADDQ $64, DI")
	})

	g.text("widenAdd"+n, "a, x *byte, chunks int", 24)
	g.p("MOVQ a+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ chunks+16(FP), CX")
	g.loop(func() {
		g.widen(h, "(SI)", "Y2")
		g.widen(h, "16(SI)", "Y3")
		g.p("VMOVUPS (DI), Y0")
		g.p("VMOVUPS 32(DI), Y1")
		g.p("VADDPS Y2, Y0, Y0")
		g.p("VADDPS Y3, Y1, Y1")
		g.p("VMOVUPS Y0, (DI)")
		g.p("VMOVUPS Y1, 32(DI)")
		g.p("ADDQ $32, SI")
		g.p("ADDQ $64, DI")
	})

	g.text("narrowAdd"+n, "d, a, x *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ a+8(FP), SI")
	g.p("MOVQ x+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.consts(h)
	g.loop(func() {
		g.widen(h, "(DX)", "Y2")
		g.widen(h, "16(DX)", "Y3")
		g.p("VMOVUPS (SI), Y0")
		g.p("VMOVUPS 32(SI), Y1")
		g.p("VADDPS Y2, Y0, Y0")
		g.p("VADDPS Y3, Y1, Y1")
		g.narrow(h)
		g.p("ADDQ $64, SI")
		g.p("ADDQ $32, DX")
		g.p("ADDQ $32, DI")
	})

	g.text("widen"+n, "a, x *byte, chunks int", 24)
	g.p("MOVQ a+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ chunks+16(FP), CX")
	g.loop(func() {
		g.widen(h, "(SI)", "Y0")
		g.widen(h, "16(SI)", "Y1")
		g.p("VMOVUPS Y0, (DI)")
		g.p("VMOVUPS Y1, 32(DI)")
		g.p("ADDQ $32, SI")
		g.p("ADDQ $64, DI")
	})

	g.text("narrow"+n, "d, a *byte, chunks int", 24)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ a+8(FP), SI")
	g.p("MOVQ chunks+16(FP), CX")
	g.consts(h)
	g.loop(func() {
		g.p("VMOVUPS (SI), Y0")
		g.p("VMOVUPS 32(SI), Y1")
		g.narrow(h)
		g.p("ADDQ $64, SI")
		g.p("ADDQ $32, DI")
	})
}

// round512 is round on the 16 float32s in Z register r, into out, with
// AVX-512: the NaN case is a masked OR instead of a blend. Uses Z4, Z5,
// K1; constants in Z10, Z11, Z13 as consts leaves them.
func (g *gen) round512(r, out string) {
	g.p("VPSRLD $16, %s, Z4", r)       // b >> 16
	g.p("VPANDD Z13, Z4, Z5")          // its lowest bit
	g.p("VPADDD Z10, %s, %s", r, out)  // b + 0x7fff
	g.p("VPADDD Z5, %s, %s", out, out) // + lsb
	g.p("VPSRLD $16, %s, %s", out, out)
	g.p("VCMPPS $3, %s, %s, K1", r, r) // NaN: unordered with itself
	g.p("VPORD Z11, Z4, K1, %s", out)  // quiet NaN, payload kept (merge-masked)
}

// sum2BF16Wide is sum2 for bfloat16 with AVX-512BW: 32 elements (two
// chunks) per round in Z registers, the in-lane interleave of widenPair
// and the in-lane pack; an odd last chunk takes one AVX2 round.
func (g *gen) sum2BF16Wide() {
	h := half{"BF16", true}
	g.text("sum2BF16Wide", "d, x, y *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ y+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	for _, c := range []struct {
		v   uint32
		reg int
	}{{0x7fff, 10}, {0x40, 11}, {1, 13}} {
		g.p("MOVL $0x%x, AX", c.v)
		g.p("VMOVD AX, X%d", c.reg)
		g.p("VPBROADCASTD X%d, Z%d", c.reg, c.reg)
	}
	g.p("VPXORD Z12, Z12, Z12")
	g.p("MOVQ CX, BX")
	g.p("SHRQ $1, BX")
	g.p("JZ tail")
	fmt.Fprintf(&g.b, "wide:\n")
	for _, src := range []struct{ mem, lo, hi string }{{"(SI)", "Z0", "Z1"}, {"(DX)", "Z2", "Z3"}} {
		g.p("VMOVDQU32 %s, Z7", src.mem)
		g.p("VPUNPCKLWD Z7, Z12, %s", src.lo)
		g.p("VPUNPCKHWD Z7, Z12, %s", src.hi)
	}
	g.p("VADDPS Z2, Z0, Z0")
	g.p("VADDPS Z3, Z1, Z1")
	g.round512("Z0", "Z8")
	g.round512("Z1", "Z9")
	g.p("VPACKUSDW Z9, Z8, Z0") // per lane: Z8's 4 then Z9's 4, the original order
	g.p("VMOVDQU32 Z0, (DI)")
	g.p("ADDQ $64, SI")
	g.p("ADDQ $64, DX")
	g.p("ADDQ $64, DI")
	g.p("DECQ BX")
	g.p("JNZ wide")
	fmt.Fprintf(&g.b, "tail:\n")
	g.p("TESTQ $1, CX")
	g.p("JZ done")
	// The Y registers are the low halves of the Z constants.
	g.widenPair(h, "(SI)", "Y0", "Y1")
	g.widenPair(h, "(DX)", "Y2", "Y3")
	g.p("VADDPS Y2, Y0, Y0")
	g.p("VADDPS Y3, Y1, Y1")
	g.narrowPair(h)
	fmt.Fprintf(&g.b, "done:\n")
	g.p("VZEROUPPER")
	g.p("RET")
}

// fop sets float32 register a = op(a, b) by the scalar rule (b if b is
// smaller/larger or NaN, else a). Uses Y8, Y9.
func (g *gen) fop(op, a, b string) {
	ins := "VMINPS"
	if op == "max" {
		ins = "VMAXPS"
	}
	g.p("%s %s, %s, Y9", ins, a, b) // b<a (b>a) ? b : a
	g.p("VCMPPS $3, %s, %s, Y8", b, b)
	g.p("VBLENDVPS Y8, %s, Y9, %s", b, a)
}

// halfMinMax emits, for op min or max, 16 elements per chunk:
//
//	{op}2:      d = half(op(f32(x), f32(y)))
//	widen{Op}:  a = op(a, f32(x))
//	narrow{Op}: d = half(op(a, f32(x)))
func (g *gen) halfMinMax(h half, op string) {
	n, Op := h.name, map[string]string{"min": "Min", "max": "Max"}[op]
	g.text(op+"2"+n, "d, x, y *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ y+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.consts(h)
	g.loop(func() {
		g.widenPair(h, "(SI)", "Y0", "Y1")
		g.widenPair(h, "(DX)", "Y2", "Y3")
		g.fop(op, "Y0", "Y2")
		g.fop(op, "Y1", "Y3")
		g.narrowPair(h)
		g.p("ADDQ $32, SI")
		g.p("ADDQ $32, DX")
		g.p("ADDQ $32, DI")
	})

	g.text("widen"+Op+n, "a, x *byte, chunks int", 24)
	g.p("MOVQ a+0(FP), DI")
	g.p("MOVQ x+8(FP), SI")
	g.p("MOVQ chunks+16(FP), CX")
	g.loop(func() {
		g.widen(h, "(SI)", "Y2")
		g.widen(h, "16(SI)", "Y3")
		g.p("VMOVUPS (DI), Y0")
		g.p("VMOVUPS 32(DI), Y1")
		g.fop(op, "Y0", "Y2")
		g.fop(op, "Y1", "Y3")
		g.p("VMOVUPS Y0, (DI)")
		g.p("VMOVUPS Y1, 32(DI)")
		g.p("ADDQ $32, SI")
		g.p("ADDQ $64, DI")
	})

	g.text("narrow"+Op+n, "d, a, x *byte, chunks int", 32)
	g.p("MOVQ d+0(FP), DI")
	g.p("MOVQ a+8(FP), SI")
	g.p("MOVQ x+16(FP), DX")
	g.p("MOVQ chunks+24(FP), CX")
	g.consts(h)
	g.loop(func() {
		g.widen(h, "(DX)", "Y2")
		g.widen(h, "16(DX)", "Y3")
		g.p("VMOVUPS (SI), Y0")
		g.p("VMOVUPS 32(SI), Y1")
		g.fop(op, "Y0", "Y2")
		g.fop(op, "Y1", "Y3")
		g.narrow(h)
		g.p("ADDQ $64, SI")
		g.p("ADDQ $32, DX")
		g.p("ADDQ $32, DI")
	})
}

// AMD64 returns the text of kernels_amd64.s.
func AMD64() []byte {
	var g gen
	g.b.WriteString("// Code generated by go run gen.go (reduce/internal/asmgen); DO NOT EDIT.\n\n//go:build !purego\n\n#include \"textflag.h\"\n")
	for _, t := range natives {
		for _, op := range []string{"add", "min", "max"} {
			g.binary(t, op)
		}
	}
	g.div(natives[0])
	g.div(natives[1])
	for _, h := range []half{{"BF16", true}, {"F16", false}} {
		g.halfKernels(h)
		g.halfMinMax(h, "min")
		g.halfMinMax(h, "max")
	}
	g.sum2BF16Wide()
	return g.b.Bytes()
}
