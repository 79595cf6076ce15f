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
(so every rank gets the same bits) with one rounding to the element type
(avg: see sum.go), and writes its own output. Held (no flagDirect): each
thread keeps its results in shared memory until the peers have read its
input, at most %[1]d 16-byte vectors, so a call moves at most %[2]d CTAs x
%[3]d threads x %[1]d x 16 B = %[4]d MiB (allreduce.go enforces it). Direct
(flagDirect, when the output aliases no input a peer reads: out-of-place
all-reduce, reduce-scatter): results are stored at once, any size.

Per CTA and per pair of ranks, as in allgather.ptx: thread k signals peer
k "my input is ready" and waits for peer k's; after summing, thread k
signals "I have read your input" and waits for peer k's; only then does
the CTA write its output, so in-place calls (out == in) are safe: the
peers' CTA b read exactly the elements this CTA b overwrites. Epochs live
in device memory (graph replay is correct); a watchdog traps after
P.timeout.

Region layout and argument check: as allgather.ptx (ready at %[5]d, done at %[6]d),
in the region all signalling kernels share (kernel.go: kernRegion).

Parameter block P (%[7]d bytes; kernel_layout.go):
  %[8]d out u64 | %[9]d bytes u64 (multiple of 16) | %[10]d region u64 (local)
  %[11]d me u32 | %[12]d n u32 | %[13]d dtype u32 (0 float32, 1 bfloat16, 2 float16)
  %[14]d flags u32 (%[19]d direct, %[20]d avg) | %[15]d src[%[16]d] u64 (rank k's input as mapped here)
  %[17]d peer regions[%[16]d] u64 | %[18]d timeout u64 (ns of %%globaltimer)`,
		arSlots, maxCTAs, threads, maxCTAs*threads*arSlots*vecBytes>>20, rReady, rDone,
		pSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, pPtrs, maxRanks, pPeerRegs, pTimeout, flagDirect, flagAvg))
	p.w("")
	p.f(".shared .align 8 .b64 ssrc[%d];", maxRanks)
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.f(".shared .align 16 .b8 sacc[%d];\n", threads*arSlots*vecBytes)
	p.entry("symmem_allreduce_pull", `	.reg .pred  %p<10>;
	.reg .pred  %q<8>;
	.reg .b16   %h<20>;
	.reg .b32   %r<72>;
	.reg .f32   %f<20>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.setup("Thread 0: sources and peer regions to shared memory, the epoch.", false, table{"ssrc", pPtrs}, table{"sreg", pPeerRegs})
	p.signalReady(`Thread k < n (k != me) talks to peer k: "my input is ready".`, "sreg")
	p.w("")
	p.f("\tld.param.u32    %%r16, [P+%d];                // flags", pFlags)
	p.f("\tand.b32         %%r56, %%r16, %d;", flagDirect)
	p.w(`	setp.ne.u32     %p3, %r56, 0;                 // %p3: direct
	// Sums: i = b*T + tid, stride S = nb*T (held: at most 4 trips, slot j of sacc).
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
	mov.u64         %rd34, %rd32;`)
	p.sumSetup()
	p.w(`L_sum:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_sum_done;
	shl.b64         %rd27, %rd24, 4;`)
	p.sumVector()
	p.w(`	@!%p3 bra       L_hold;
	add.u64         %rd36, %rd1, %rd27;
	st.global.v4.u32 [%rd36], {%r21, %r22, %r23, %r24};
	add.u64         %rd24, %rd24, %rd26;
	bra             L_sum;
L_hold:`)
	p.w("\tst.shared.v4.u32 [%rd34], {%r21, %r22, %r23, %r24};")
	p.f("\tadd.u64         %%rd34, %%rd34, %d;           // next slot: %d threads x 16 B", threads*vecBytes, threads)
	p.w(`	add.u64         %rd24, %rd24, %rd26;
	bra             L_sum;
L_sum_done:
	// Every thread's loads of the peers' inputs are done (their values are in
	// shared memory): thread k tells peer k, then waits for peer k's word.`)
	p.signalDone(false, "L_done_done")
	p.w(`L_done_done:
	@%p3 bra        L_end;                        // direct: stored already
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
	bra             L_out;`)
	p.finish()
	p.faultExit()
	p.w("}")
	return p.b.String()
}
