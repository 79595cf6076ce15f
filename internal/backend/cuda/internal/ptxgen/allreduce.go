package main

import "fmt"

// allReduce is ptx/allreduce.ptx. Rank k's 16-byte vector lives in
// quad(k); %qk says rank k exists (k < n).
func allReduce() string {
	var p ptx
	p.header(fmt.Sprintf(`allreduce.ptx: symmem's one-shot all-reduce for small messages (sum of
float32, bfloat16 or float16; PTX from internal/backend/cuda/internal/ptxgen,
JIT-compiled by the driver).

Pull: every rank reads every rank's input through the peer mappings (all
ranks' vector i in flight at once), sums in float32 in rank order 0..n-1
(so every rank gets the same bits) with one rounding to the element type,
and writes its own output. One pass: each thread holds at most %[1]d 16-byte
result vectors in shared memory, so a call moves at most %[2]d CTAs x %[3]d
threads x %[1]d x 16 B = %[4]d MiB (allreduce.go enforces it).

Per CTA and per pair of ranks, as in allgather.ptx: thread k signals peer
k "my input is ready" and waits for peer k's; after summing, thread k
signals "I have read your input" and waits for peer k's; only then does
the CTA write its output, so in-place calls (out == in) are safe: the
peers' CTA b read exactly the elements this CTA b overwrites. Epochs live
in device memory (graph replay is correct); a watchdog traps after
P.timeout.

Region layout: as allgather.ptx (cnt at 0, ready at %[5]d, done at %[6]d),
in a separate region of the pad (kernel.go: arRegion).

Parameter block P (%[7]d bytes; kernel_layout.go):
  %[8]d out u64 | %[9]d bytes u64 (multiple of 16) | %[10]d region u64 (local)
  %[11]d me u32 | %[12]d n u32 | %[13]d dtype u32 (0 float32, 1 bfloat16, 2 float16)
  %[14]d unused | %[15]d src[%[16]d] u64 (rank k's input as mapped here)
  %[17]d peer regions[%[16]d] u64 | %[18]d timeout u64 (ns of %%globaltimer)`,
		arSlots, maxCTAs, threads, maxCTAs*threads*arSlots*vecBytes>>20, rReady, rDone,
		pSize, pA, pBytes, pRegion, pMe, pN, pMode, pMode+4, pPtrs, maxRanks, pPeerRegs, pTimeout))
	p.w("")
	p.f(".shared .align 8 .b64 ssrc[%d];", maxRanks)
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.f(".shared .align 16 .b8 sacc[%d];\n", threads*arSlots*vecBytes)
	p.entry("symmem_allreduce_pull", `	.reg .pred  %p<10>;
	.reg .pred  %q<8>;
	.reg .b16   %h<20>;
	.reg .b32   %r<72>;
	.reg .f32   %f<20>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.setup("Thread 0: sources and peer regions to shared memory, the epoch.", table{"ssrc", pPtrs}, table{"sreg", pPeerRegs})
	p.signalReady(`Thread k < n (k != me) talks to peer k: "my input is ready".`, "sreg")
	p.w("")
	p.w(`	// Sums: i = b*T + tid, stride S = nb*T, at most 4 trips (slot j of sacc).
	shr.u64         %rd29, %rd2, 4;               // V
	mul.wide.u32    %rd24, %r2, %r3;
	cvt.u64.u32     %rd25, %r1;
	add.u64         %rd24, %rd24, %rd25;          // i
	mov.u64         %rd30, %rd24;                 // first i (for the writes)
	mul.wide.u32    %rd26, %r4, %r3;              // S
	mov.u64         %rd31, ssrc;
	mov.u64         %rd32, sacc;
	mul.wide.u32    %rd33, %r1, 16;
	add.u64         %rd32, %rd32, %rd33;          // slot 0 of this thread
	mov.u64         %rd34, %rd32;
	// %qk: rank k exists (k < n).`)
	for k := 1; k < maxRanks; k++ {
		p.f("\tsetp.gt.u32     %%q%d, %%r6, %d;", k, k)
	}
	p.w(`L_sum:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_sum_done;
	shl.b64         %rd27, %rd24, 4;
	// Every rank's vector i in flight at once: quad k in %r(21+4k)..%r(24+4k).`)
	p.w("\tld.shared.u64   %rd35, [%rd31];")
	p.w("\tadd.u64         %rd36, %rd35, %rd27;")
	p.f("\tld.global.cg.v4.u32 %s, [%%rd36];", quad(0))
	for k := 1; k < maxRanks; k++ {
		p.f("\t@%%q%d ld.shared.u64 %%rd35, [%%rd31+%d];", k, 8*k)
		p.f("\t@%%q%d add.u64   %%rd36, %%rd35, %%rd27;", k)
		p.f("\t@%%q%d ld.global.cg.v4.u32 %s, [%%rd36];", k, quad(k))
	}
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
		p.f("\tmov.b32         %%r%d, %%f%d;", 21+j, 1+j)
	}
	p.w(`	bra             L_store;

	// bfloat16: a word holds two; lo << 16 and hi & 0xffff0000 are floats.
L_bf16:`)
	bf16Unpack := func(k, f0 int) {
		for j := 0; j < 4; j++ {
			r := fmt.Sprintf("%%r%d", 21+4*k+j)
			p.f("\tshl.b32         %%r56, %s, 16;", r)
			p.f("\tmov.b32         %%f%d, %%r56;", f0+2*j)
			p.f("\tand.b32         %%r56, %s, -65536;", r)
			p.f("\tmov.b32         %%f%d, %%r56;", f0+2*j+1)
		}
	}
	p.sumHalves("L_bf16_done", bf16Unpack)
	p.w(`L_bf16_done:
	// Round to nearest even: (u + 0x7fff + (u >> 16 & 1)) >> 16; NaN -> 0x7fc0.`)
	for j := 0; j < 8; j++ {
		f := fmt.Sprintf("%%f%d", 1+j)
		p.f("\tmov.b32         %%r57, %s;", f)
		p.w("\tshr.u32         %r58, %r57, 16;")
		p.w("\tand.b32         %r58, %r58, 1;")
		p.w("\tadd.u32         %r58, %r58, 32767;")
		p.w("\tadd.u32         %r58, %r57, %r58;")
		p.w("\tshr.u32         %r58, %r58, 16;")
		p.f("\tsetp.nan.f32    %%p9, %s, %s;", f, f)
		p.f("\tselp.b32        %%r%d, 32704, %%r58, %%p9;", 60+j)
	}
	for j := 0; j < 4; j++ {
		p.f("\tshl.b32         %%r%d, %%r%d, 16;", 61+2*j, 61+2*j)
		p.f("\tor.b32          %%r%d, %%r%d, %%r%d;", 21+j, 60+2*j, 61+2*j)
	}
	p.w(`	bra             L_store;

	// float16 through cvt.
L_f16:`)
	f16Unpack := func(k, f0 int) {
		for j := 0; j < 4; j++ {
			p.f("\tmov.b32         {%%h%d, %%h%d}, %%r%d;", 1+2*j, 2+2*j, 21+4*k+j)
			p.f("\tcvt.f32.f16     %%f%d, %%h%d;", f0+2*j, 1+2*j)
			p.f("\tcvt.f32.f16     %%f%d, %%h%d;", f0+2*j+1, 2+2*j)
		}
	}
	p.sumHalves("L_f16_done", f16Unpack)
	p.w("L_f16_done:")
	for j := 0; j < 8; j++ {
		p.f("\tcvt.rn.f16.f32  %%h%d, %%f%d;", 1+j, 1+j)
	}
	for j := 0; j < 4; j++ {
		p.f("\tmov.b32         %%r%d, {%%h%d, %%h%d};", 21+j, 1+2*j, 2+2*j)
	}
	p.w("\nL_store:\n\tst.shared.v4.u32 [%rd34], {%r21, %r22, %r23, %r24};")
	p.f("\tadd.u64         %%rd34, %%rd34, %d;           // next slot: %d threads x 16 B", threads*vecBytes, threads)
	p.w(`	add.u64         %rd24, %rd24, %rd26;
	bra             L_sum;
L_sum_done:
	// Every thread's loads of the peers' inputs are done (their values are in
	// shared memory): thread k tells peer k, then waits for peer k's word.`)
	p.signalDone(false, "L_done_done")
	p.w(`L_done_done:
	bar.sync        0;

	// Output: no peer reads these elements of this rank's input any more.
	mov.u64         %rd24, %rd30;
	mov.u64         %rd34, %rd32;
L_out:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_end;
	ld.shared.v4.u32 {%r21, %r22, %r23, %r24}, [%rd34];
	shl.b64         %rd27, %rd24, 4;
	add.u64         %rd36, %rd1, %rd27;
	st.global.v4.u32 [%rd36], {%r21, %r22, %r23, %r24};`)
	p.f("\tadd.u64         %%rd34, %%rd34, %d;", threads*vecBytes)
	p.w(`	add.u64         %rd24, %rd24, %rd26;
	bra             L_out;
L_end:
	ret;
}`)
	return p.b.String()
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
