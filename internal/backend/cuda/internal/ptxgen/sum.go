package main

import "fmt"

// The reduction both reduction kernels share: every rank's 16-byte vector
// loaded at once, summed in float32 in rank order 0..n-1 (so every rank gets
// the same bits), rounded once to the element type; avg then divides as
// reduce.Finish does (16-bit types: the rounded sum widened, divided by n in
// float32, rounded again), so the GPU and CPU backends agree bit for bit.
//
// Registers: %r6 n, %r7 dtype code, %r16 flags; sumSetup sets %q1..%q7
// (rank k exists), %p8 (avg) and %f18 (n as float32). sumVector reads rank
// k's vector at [table[k] + %rd27] (%rd31: the shared table) into quad(k)
// and leaves the result in %r21..%r24; scratch %r56..%r68, %f1..%f16,
// %h1..%h16, %p7, %p9, %rd35, %rd36.

// sumSetup: the rank predicates, the avg flag and n as float32.
func (p *ptx) sumSetup() {
	p.w("\t// %qk: rank k exists (k < n); %p8: avg; %f18: n.")
	for k := 1; k < maxRanks; k++ {
		p.f("\tsetp.gt.u32     %%q%d, %%r6, %d;", k, k)
	}
	p.f("\tand.b32         %%r56, %%r16, %d;", flagAvg)
	p.w(`	setp.ne.u32     %p8, %r56, 0;
	cvt.rn.f32.u32  %f18, %r6;`)
}

// sumVector: one 16-byte result vector in %r21..%r24 (see above).
func (p *ptx) sumVector() {
	p.loadQuads()
	p.sumQuads()
}

// loadQuads loads rank k's vector at [table[k] + %rd27] into quad(k).
func (p *ptx) loadQuads() {
	p.w("\t// Every rank's vector in flight at once: quad k in %r(21+4k)..%r(24+4k).")
	p.w("\tld.shared.u64   %rd35, [%rd31];")
	p.w("\tadd.u64         %rd36, %rd35, %rd27;")
	p.f("\tld.global.cg.v4.u32 %s, [%%rd36];", quad(0))
	for k := 1; k < maxRanks; k++ {
		p.f("\t@%%q%d ld.shared.u64 %%rd35, [%%rd31+%d];", k, 8*k)
		p.f("\t@%%q%d add.u64   %%rd36, %%rd35, %%rd27;", k)
		p.f("\t@%%q%d ld.global.cg.v4.u32 %s, [%%rd36];", k, quad(k))
	}
}

// sumQuads sums quad(0)..quad(n-1) (rank k's vector in quad(k)) into
// %r21..%r24: float32 in rank order, one rounding, avg (see above).
func (p *ptx) sumQuads() {
	p.w(`	setp.eq.u32     %p7, %r7, 1;
	@%p7 bra        L_bf16;
	setp.eq.u32     %p7, %r7, 2;
	@%p7 bra        L_f16;

	// float32`)
	for j := 0; j < 4; j++ {
		p.f("\tmov.b32         %%f%d, %%r%d;", 1+j, 21+j)
	}
	for k := 1; k < maxRanks; k++ {
		for j := 0; j < 4; j++ {
			p.f("\tmov.b32         %%f%d, %%r%d;", 5+j, 21+4*k+j)
			p.f("\t@%%q%d add.rn.f32 %%f%d, %%f%d, %%f%d;", k, 1+j, 1+j, 5+j)
		}
	}
	for j := 0; j < 4; j++ {
		p.f("\t@%%p8 div.rn.f32 %%f%d, %%f%d, %%f18;", 1+j, 1+j)
	}
	for j := 0; j < 4; j++ {
		p.f("\tmov.b32         %%r%d, %%f%d;", 21+j, 1+j)
	}
	p.w(`	bra             L_sum_packed;

	// bfloat16: a word holds two; lo << 16 and hi & 0xffff0000 are floats.
L_bf16:`)
	p.sumHalves("L_bf16_done", p.bf16Unpack)
	p.w("L_bf16_done:")
	p.bf16Pack()
	p.w("\t@!%p8 bra       L_sum_packed;")
	p.bf16Unpack(0, 1)
	p.divHalves()
	p.bf16Pack()
	p.w(`	bra             L_sum_packed;

	// float16 through cvt.
L_f16:`)
	p.sumHalves("L_f16_done", p.f16Unpack)
	p.w("L_f16_done:")
	p.f16Pack()
	p.w("\t@!%p8 bra       L_sum_packed;")
	p.f16Unpack(0, 1)
	p.divHalves()
	p.f16Pack()
	p.w("L_sum_packed:")
}

// bf16Unpack widens rank k's quad (eight bfloat16) into %f(f0)..%f(f0+7).
func (p *ptx) bf16Unpack(k, f0 int) {
	for j := 0; j < 4; j++ {
		r := fmt.Sprintf("%%r%d", 21+4*k+j)
		p.f("\tshl.b32         %%r56, %s, 16;", r)
		p.f("\tmov.b32         %%f%d, %%r56;", f0+2*j)
		p.f("\tand.b32         %%r56, %s, -65536;", r)
		p.f("\tmov.b32         %%f%d, %%r56;", f0+2*j+1)
	}
}

// f16Unpack widens rank k's quad (eight float16) into %f(f0)..%f(f0+7).
func (p *ptx) f16Unpack(k, f0 int) {
	for j := 0; j < 4; j++ {
		p.f("\tmov.b32         {%%h%d, %%h%d}, %%r%d;", 1+2*j, 2+2*j, 21+4*k+j)
		p.f("\tcvt.f32.f16     %%f%d, %%h%d;", f0+2*j, 1+2*j)
		p.f("\tcvt.f32.f16     %%f%d, %%h%d;", f0+2*j+1, 2+2*j)
	}
}

// bf16Pack rounds %f1..%f8 to bfloat16 into %r21..%r24 (bf16Round).
func (p *ptx) bf16Pack() {
	for j := 0; j < 8; j++ {
		p.bf16Round(1+j, 60+j)
	}
	for j := 0; j < 4; j++ {
		p.f("\tshl.b32         %%r%d, %%r%d, 16;", 61+2*j, 61+2*j)
		p.f("\tor.b32          %%r%d, %%r%d, %%r%d;", 21+j, 60+2*j, 61+2*j)
	}
}

// f16Pack rounds %f1..%f8 to float16 into %r21..%r24.
func (p *ptx) f16Pack() {
	for j := 0; j < 8; j++ {
		p.f("\tcvt.rn.f16.f32  %%h%d, %%f%d;", 1+j, 1+j)
	}
	for j := 0; j < 4; j++ {
		p.f("\tmov.b32         %%r%d, {%%h%d, %%h%d};", 21+j, 1+2*j, 2+2*j)
	}
}

// divHalves divides %f1..%f8 by n (avg of a 16-bit type).
func (p *ptx) divHalves() {
	for j := 0; j < 8; j++ {
		p.f("\tdiv.rn.f32      %%f%d, %%f%d, %%f18;", 1+j, 1+j)
	}
}

// sumHalves sums the 16-bit types: unpack(k, f0) widens rank k's quad (eight
// values) into %f(f0)..%f(f0+7); rank 0 lands in %f1..%f8, every further
// existing rank in %f9..%f16 and is added in rank order. The first missing
// rank ends the sum (ranks are 0..n-1).
func (p *ptx) sumHalves(done string, unpack func(k, f0 int)) {
	unpack(0, 1)
	for k := 1; k < maxRanks; k++ {
		p.f("\t@!%%q%d bra       %s;", k, done)
		unpack(k, 9)
		for j := 0; j < 8; j++ {
			p.f("\tadd.rn.f32      %%f%d, %%f%d, %%f%d;", 1+j, 1+j, 9+j)
		}
	}
}

// sumElement: one element's result, summed exactly as sumVector sums each
// lane (float32 in rank order, one rounding, avg as there), for the tail of
// vector mode and for element mode (P.unit: an address is not 16-byte
// aligned). Rank k's element is at [table[k] + %rd27] (%rd31: the shared
// table); the result is in %r21 (float32) or %h1 (the 16-bit types).
// Scratch: %r21+4k (float32 loads), %h1..%h8 (16-bit loads), %r56..%r58,
// %r60, %f1, %f9, %p7, %p9, %rd35, %rd36. Labels start with L_el_.
func (p *ptx) sumElement() {
	p.w(`	// Every rank's element in flight at once.
	ld.shared.u64   %rd35, [%rd31];
	add.u64         %rd36, %rd35, %rd27;
	setp.ne.u32     %p7, %r7, 0;
	@%p7 bra        L_el_half;
	ld.global.cg.u32 %r21, [%rd36];`)
	for k := 1; k < maxRanks; k++ {
		p.f("\t@%%q%d ld.shared.u64 %%rd35, [%%rd31+%d];", k, 8*k)
		p.f("\t@%%q%d add.u64   %%rd36, %%rd35, %%rd27;", k)
		p.f("\t@%%q%d ld.global.cg.u32 %%r%d, [%%rd36];", k, 21+4*k)
	}
	p.w("\tmov.b32         %f1, %r21;")
	for k := 1; k < maxRanks; k++ {
		p.f("\tmov.b32         %%f9, %%r%d;", 21+4*k)
		p.f("\t@%%q%d add.rn.f32 %%f1, %%f1, %%f9;", k)
	}
	p.w(`	@%p8 div.rn.f32 %f1, %f1, %f18;
	mov.b32         %r21, %f1;
	bra             L_el_summed;
L_el_half:
	ld.global.cg.u16 %h1, [%rd36];`)
	for k := 1; k < maxRanks; k++ {
		p.f("\t@%%q%d ld.shared.u64 %%rd35, [%%rd31+%d];", k, 8*k)
		p.f("\t@%%q%d add.u64   %%rd36, %%rd35, %%rd27;", k)
		p.f("\t@%%q%d ld.global.cg.u16 %%h%d, [%%rd36];", k, 1+k)
	}
	p.w(`	setp.eq.u32     %p7, %r7, 2;
	@%p7 bra        L_el_f16;
	// bfloat16: h << 16 is the float.`)
	bf16 := func(h, f int) {
		p.f("\tcvt.u32.u16     %%r56, %%h%d;", h)
		p.w("\tshl.b32         %r56, %r56, 16;")
		p.f("\tmov.b32         %%f%d, %%r56;", f)
	}
	bf16(1, 1)
	for k := 1; k < maxRanks; k++ {
		p.f("\t@!%%q%d bra       L_el_bf16_done;", k)
		bf16(1+k, 9)
		p.w("\tadd.rn.f32      %f1, %f1, %f9;")
	}
	p.w("L_el_bf16_done:")
	p.bf16Pack1()
	p.w("\t@!%p8 bra       L_el_summed;")
	bf16(1, 1)
	p.w("\tdiv.rn.f32      %f1, %f1, %f18;")
	p.bf16Pack1()
	p.w(`	bra             L_el_summed;
L_el_f16:
	cvt.f32.f16     %f1, %h1;`)
	for k := 1; k < maxRanks; k++ {
		p.f("\t@!%%q%d bra       L_el_f16_done;", k)
		p.f("\tcvt.f32.f16     %%f9, %%h%d;", 1+k)
		p.w("\tadd.rn.f32      %f1, %f1, %f9;")
	}
	p.w(`L_el_f16_done:
	cvt.rn.f16.f32  %h1, %f1;
	@!%p8 bra       L_el_summed;
	cvt.f32.f16     %f1, %h1;
	div.rn.f32      %f1, %f1, %f18;
	cvt.rn.f16.f32  %h1, %f1;
L_el_summed:`)
}

// bf16Pack1 rounds %f1 to bfloat16 into %h1, as bf16Pack rounds each lane.
func (p *ptx) bf16Pack1() {
	p.bf16Round(1, 60)
	p.w("\tcvt.u16.u32     %h1, %r60;")
}

// bf16Round rounds %f(f) to bfloat16 bits in the low half of %r(r): round
// to nearest even, (u + 0x7fff + (u >> 16 & 1)) >> 16; NaN -> 0x7fc0.
func (p *ptx) bf16Round(f, r int) {
	p.f("\tmov.b32         %%r57, %%f%d;", f)
	p.w("\tshr.u32         %r58, %r57, 16;")
	p.w("\tand.b32         %r58, %r58, 1;")
	p.w("\tadd.u32         %r58, %r58, 32767;")
	p.w("\tadd.u32         %r58, %r57, %r58;")
	p.w("\tshr.u32         %r58, %r58, 16;")
	p.f("\tsetp.nan.f32    %%p9, %%f%d, %%f%d;", f, f)
	p.f("\tselp.b32        %%r%d, 32704, %%r58, %%p9;", r)
}
