package main

import "fmt"

func init() { register("ptx/allreduce.ptx", allReduce) }

// allReduce is ptx/allreduce.ptx. Rank k's 16-byte vector lives in
// quad(k); %qk says rank k exists (k < n); the tail and element mode sum one
// element at a time (sumElement).
func allReduce() string {
	p := ptx{abandon: true}
	p.header(fmt.Sprintf(`allreduce.ptx: symmem's one-shot all-reduce for small messages (sum of
float32, bfloat16 or float16; PTX from internal/backend/cuda/internal/ptxgen,
JIT-compiled by the driver).

Pull: every rank reads every rank's input through the peer mappings (all
ranks' vector i in flight at once), sums in float32 in rank order 0..n-1
(so every rank gets the same bits) with one rounding to the element type
(avg: see sum.go), and writes its own output. Any count: in vector mode
(P.unit 16: every address 16-byte aligned) bytes/16 vectors, then the last
bytes%%16 element by element; in element mode (P.unit = the element size)
every element alone, summed the same way (slower). Held (no flagDirect):
each thread keeps its results until the peers have read its input, in
shared memory (at most %[1]d 16-byte vectors, or 64 bytes of elements) and
registers (vector mode's tail element), so a call moves at most %[2]d CTAs
x %[3]d threads x %[1]d x 16 B = %[4]d MiB (allreduce.go enforces it); every
rank must then run the same mode (the same CTA reads and writes an
element). Direct (flagDirect, when the output aliases no input a peer
reads: out-of-place all-reduce, reduce-scatter): results are stored at
once, any size.

Per CTA and per pair of ranks, as in allgather.ptx: thread k signals peer
k "my input is ready" and waits for peer k's; after summing, thread k
signals "I have read your input" and waits for peer k's; only then does
the CTA write its output, so in-place calls (out == in) are safe: the
peers' CTA b read exactly the elements this CTA b overwrites. Epochs live
in device memory (graph replay is correct); a watchdog traps after
P.timeout, and a wait ends early when the call gate failed (P.stop; as
allgather.ptx).

Region layout and argument check: as allgather.ptx (ready at %[5]d, done at %[6]d),
in the region all signalling kernels share (kernel.go: kernRegion).

Parameter block P (%[7]d bytes; kernel_layout.go):
  %[8]d out u64 | %[9]d bytes u64 (whole elements) | %[10]d region u64 (local)
  %[11]d me u32 | %[12]d n u32 | %[13]d dtype u32 (0 float32, 1 bfloat16, 2 float16)
  %[14]d flags u32 (%[19]d direct, %[20]d avg) | %[15]d src[%[16]d] u64 (rank k's input as mapped here)
  %[17]d peer regions[%[16]d] u64 | %[18]d timeout u64 (ns of %%globaltimer)
  %[21]d unit u32 (16: vector mode; 2 or 4: element mode) | %[22]d stop u64`,
		arSlots, maxCTAs, threads, maxCTAs*threads*arSlots*vecBytes>>20, rReady, rDone,
		pSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, pPtrs, maxRanks, pPeerRegs, pTimeout, flagDirect, flagAvg, pUnit, pStop))
	p.w("")
	p.f(".shared .align 8 .b64 ssrc[%d];", maxRanks)
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.f(".shared .align 16 .b8 sacc[%d];\n", threads*arSlots*vecBytes)
	p.entryTuned("symmem_allreduce_pull", fmt.Sprintf(".maxntid %d, 1, 1", threads), `	.reg .pred  %p<13>;
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
	p.w(`	setp.ne.u32     %p3, %r56, 0;                 // %p3: direct`)
	p.f("\tld.param.u32    %%r19, [P+%d];                // unit", pUnit)
	p.w(`	setp.eq.u32     %p10, %r19, 16;               // %p10: vector mode (else element mode)
	setp.eq.u32     %p12, %r7, 0;                 // %p12: float32 (4-byte elements)
	selp.u32        %r18, 2, 1, %p12;             // log2 of the element size
	shr.u64         %rd4, %rd2, %r18;             // elements
	setp.ne.u32     %p11, %r1, %r1;               // %p11 (false): a held tail element in %r53 / %h19
	// Sums: i = b*T + tid, stride S = nb*T (held: at most 4 trips, slot j of sacc).
	shr.u64         %rd29, %rd2, 4;               // V
	@!%p10 mov.u64  %rd29, 0;                     // element mode: no vectors
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
	// Elements e from the vectors' end (V x 16 / size; element mode: 0),
	// e = that + b*T + tid, stride S: vector mode's tail (fewer than 8, one
	// per thread at most, held in registers), or every element (held: at
	// sacc + (j x T + tid) x size, trip j, at most 64 bytes per thread).
	shl.b64         %rd5, %rd29, 4;
	shr.u64         %rd5, %rd5, %r18;
	add.u64         %rd5, %rd5, %rd30;            // e
	mov.u64         %rd9, sacc;
	cvt.u64.u32     %rd33, %r1;
	shl.b64         %rd33, %rd33, %r18;
	add.u64         %rd9, %rd9, %rd33;            // element slot 0 of this thread
	mov.u64         %rd6, %rd9;`)
	p.f("\tmov.u64         %%rd7, %d;", threads)
	p.w(`	shl.b64         %rd7, %rd7, %r18;             // T x size: the next element slot
L_el:
	setp.ge.u64     %p5, %rd5, %rd4;
	@%p5 bra        L_el_done;
	shl.b64         %rd27, %rd5, %r18;`)
	p.sumElement()
	p.w(`	@%p3 bra        L_el_store;
	@!%p10 bra      L_el_hold;
	mov.b32         %r53, %r21;                   // vector mode's tail: kept in registers
	mov.b16         %h19, %h1;
	mov.u64         %rd8, %rd27;
	setp.eq.u32     %p11, %r1, %r1;
	bra             L_el_next;
L_el_hold:
	@%p12 st.shared.u32 [%rd6], %r21;
	@!%p12 st.shared.u16 [%rd6], %h1;
	add.u64         %rd6, %rd6, %rd7;
	bra             L_el_next;
L_el_store:
	add.u64         %rd36, %rd1, %rd27;
	@%p12 st.global.u32 [%rd36], %r21;
	@!%p12 st.global.u16 [%rd36], %h1;
L_el_next:
	add.u64         %rd5, %rd5, %rd26;
	bra             L_el;
L_el_done:
	// Every thread's loads of the peers' inputs are done (their values are in
	// shared memory or registers): thread k tells peer k, then waits for
	// peer k's word.`)
	p.signalDone(false, "L_done_done")
	p.w(`L_done_done:
	@%p3 bra        L_end;                        // direct: stored already
	bar.sync        0;

	// Output: no peer reads these elements of this rank's input any more.
	mov.u64         %rd24, %rd30;
	mov.u64         %rd34, %rd32;
L_out:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_out_el;
	ld.shared.v4.u32 {%r21, %r22, %r23, %r24}, [%rd34];
	shl.b64         %rd27, %rd24, 4;
	add.u64         %rd36, %rd1, %rd27;
	st.global.v4.u32 [%rd36], {%r21, %r22, %r23, %r24};`)
	p.f("\tadd.u64         %%rd34, %%rd34, %d;", threads*vecBytes)
	p.w(`	add.u64         %rd24, %rd24, %rd26;
	bra             L_out;
L_out_el:
	@!%p10 bra      L_out_elements;
	@!%p11 bra      L_end;
	add.u64         %rd36, %rd1, %rd8;            // vector mode's tail element
	@%p12 st.global.u32 [%rd36], %r53;
	@!%p12 st.global.u16 [%rd36], %h19;
	bra             L_end;
L_out_elements:
	mov.u64         %rd5, %rd30;
	mov.u64         %rd6, %rd9;
L_out_e:
	setp.ge.u64     %p5, %rd5, %rd4;
	@%p5 bra        L_end;
	shl.b64         %rd27, %rd5, %r18;
	add.u64         %rd36, %rd1, %rd27;
	@%p12 ld.shared.u32 %r21, [%rd6];
	@%p12 st.global.u32 [%rd36], %r21;
	@!%p12 ld.shared.u16 %h1, [%rd6];
	@!%p12 st.global.u16 [%rd36], %h1;
	add.u64         %rd6, %rd6, %rd7;
	add.u64         %rd5, %rd5, %rd26;
	bra             L_out_e;`)
	p.finish()
	p.faultExit()
	p.w("}")
	return p.b.String()
}
