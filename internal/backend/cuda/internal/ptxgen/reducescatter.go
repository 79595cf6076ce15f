package main

import "fmt"

// reduceScatterLC is ptx/reducescatter.ptx: the reduction half of the
// low-contention reduce-scatter (internal/backend/cuda/lowcontention.go
// drives it).
func reduceScatterLC() string {
	var p ptx
	p.header(fmt.Sprintf(`reducescatter.ptx: the reduction half of symmem's low-contention
reduce-scatter (PTX from internal/backend/cuda/internal/ptxgen, JIT-compiled by
the driver). Copy engines pull every peer's chunk for this rank into local
staging, sub-chunk by sub-chunk, on side streams; this kernel, launched
with a few CTAs beside them, sums each sub-chunk as it arrives, so the
data moves without SMs and the sums take few.

Staging has two slots of n-1 sub-chunks (peer j = the j-th other rank in
rank order); sub-chunk c lands in slot c%%2. Words in the local block W
(P.region): consumed at 0, arrived[j] at 4+4j, finished[2] at %[14]d. Side
stream j writes arrived[j] = c+1 after its copy of sub-chunk c; the kernel's
thread 0 waits until every arrived[j] >= c+1, the CTA sums sub-chunk c (rank
order, float32, as sum.go; the own rank's part read in place) into the
output, then thread 0 adds 1 to finished[c%%2]; the CTA that completes the
count (every CTA done with sub-chunk c) sets it back to 0 and publishes
consumed = c+1 (release). Side streams wait for consumed >= c-1 before they
overwrite slot c%%2 with sub-chunk c. A CTA cannot reach sub-chunk c+2
before every CTA finished c (its copy waited for that), so finished[c%%2]
never mixes two sub-chunks. The stream resets W after the kernel (no
host-chosen values: graph replay is correct); waits trap after P.timeout.

Parameter block P (%[1]d bytes; kernel_layout.go):
  %[2]d out u64 | %[3]d bytes u64 (this rank's output, multiple of 16) | %[4]d W u64 (local)
  %[5]d me u32 | %[6]d n u32 | %[7]d dtype u32 | %[8]d flags u32 (%[9]d avg)
  %[10]d own u64 (in + me x bytes) | %[11]d staging u64 | %[12]d sub-chunk bytes u64 | %[13]d timeout u64`,
		pSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, flagAvg, pOwn, pStaging, pChunk, pTimeout, wFinished))
	p.w("")
	p.f(".shared .align 8 .b64 ssrc[%d];\n", maxRanks)
	p.entry("symmem_reducescatter_lc", `	.reg .pred  %p<10>;
	.reg .pred  %q<8>;
	.reg .b16   %h<20>;
	.reg .b32   %r<72>;
	.reg .f32   %f<20>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.f("\tld.param.u32    %%r16, [P+%d];                // flags", pFlags)
	p.f("\tld.param.u64    %%rd4, [P+%d];                // own", pOwn)
	p.f("\tld.param.u64    %%rd5, [P+%d];                // staging", pStaging)
	p.f("\tld.param.u64    %%rd6, [P+%d];                // C", pChunk)
	p.w(`	add.u64         %rd7, %rd2, %rd6;
	sub.u64         %rd7, %rd7, 1;
	div.u64         %rd7, %rd7, %rd6;             // sub-chunks
	mul.wide.u32    %rd30, %r2, %r3;
	cvt.u64.u32     %rd25, %r1;
	add.u64         %rd30, %rd30, %rd25;          // first i of this thread
	mul.wide.u32    %rd26, %r4, %r3;              // S
	mov.u64         %rd31, ssrc;
	sub.u32         %r20, %r6, 1;                 // n-1
	setp.ne.u32     %p1, %r1, 0;                  // %p1: not thread 0`)
	p.sumSetup()
	p.w(`	mov.u32         %r17, 0;                      // c
	mov.u64         %rd8, 0;                      // c x C
L_chunk:
	cvt.u64.u32     %rd9, %r17;
	setp.ge.u64     %p5, %rd9, %rd7;
	@%p5 bra        L_end;
	@%p1 bra        L_ready;
	// Thread 0: wait until every peer's sub-chunk c has arrived.
	add.u32         %r8, %r17, 1;                 // target c+1
	mov.u32         %r18, 0;                      // j
L_arrived:
	setp.ge.u32     %p7, %r18, %r20;
	@%p7 bra        L_table;
	mul.wide.u32    %rd11, %r18, 4;
	add.u64         %rd12, %rd3, %rd11;
	add.u64         %rd12, %rd12, 4;              // &arrived[j]`)
	p.wait("L_spin_arrived", "%rd12", "L_arrived_next")
	p.w(`L_arrived_next:
	add.u32         %r18, %r18, 1;
	bra             L_arrived;
L_table:
	// ssrc[k]: rank k's sub-chunk c (own input for me, else its staging slot).
	and.b32         %r19, %r17, 1;
	mul.lo.u32      %r19, %r19, %r20;             // (c%2)(n-1)
	mov.u32         %r18, 0;                      // k
L_table_k:
	setp.ge.u32     %p7, %r18, %r6;
	@%p7 bra        L_ready;
	setp.gt.u32     %p9, %r18, %r5;
	selp.u32        %r12, 1, 0, %p9;
	sub.u32         %r12, %r18, %r12;             // j of rank k
	add.u32         %r12, %r12, %r19;
	cvt.u64.u32     %rd13, %r12;
	mul.lo.u64      %rd13, %rd13, %rd6;
	add.u64         %rd13, %rd5, %rd13;           // staging slot
	add.u64         %rd14, %rd4, %rd8;            // own sub-chunk
	setp.eq.u32     %p9, %r18, %r5;
	selp.b64        %rd13, %rd14, %rd13, %p9;
	mul.wide.u32    %rd15, %r18, 8;
	add.u64         %rd15, %rd31, %rd15;
	st.shared.u64   [%rd15], %rd13;
	add.u32         %r18, %r18, 1;
	bra             L_table_k;
L_ready:
	bar.sync        0;
	// This sub-chunk: min(C, bytes - c x C) bytes, V vectors.
	sub.u64         %rd9, %rd2, %rd8;
	min.u64         %rd9, %rd9, %rd6;
	shr.u64         %rd29, %rd9, 4;               // V
	add.u64         %rd10, %rd1, %rd8;            // output of sub-chunk c
	mov.u64         %rd24, %rd30;
L_sum:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_sum_done;
	shl.b64         %rd27, %rd24, 4;`)
	p.sumVector()
	p.w(`	add.u64         %rd36, %rd10, %rd27;
	st.global.v4.u32 [%rd36], {%r21, %r22, %r23, %r24};
	add.u64         %rd24, %rd24, %rd26;
	bra             L_sum;
L_sum_done:
	// Every thread's loads of sub-chunk c are done: the slot may be refilled.
	bar.sync        0;
	@%p1 bra        L_next;`)
	p.f("\tadd.u64         %%rd16, %%rd3, %d;", wFinished)
	p.w(`	and.b32         %r19, %r17, 1;
	mul.wide.u32    %rd17, %r19, 4;
	add.u64         %rd16, %rd16, %rd17;          // &finished[c%2]
	atom.acq_rel.sys.global.add.u32 %r19, [%rd16], 1;
	sub.u32         %r18, %r4, 1;
	setp.ne.u32     %p9, %r19, %r18;
	@%p9 bra        L_next;                       // not the last CTA done with sub-chunk c
	st.relaxed.sys.global.u32 [%rd16], 0;
	add.u32         %r19, %r17, 1;
	st.release.sys.global.u32 [%rd3], %r19;       // consumed = c+1
L_next:
	add.u32         %r17, %r17, 1;
	add.u64         %rd8, %rd8, %rd6;
	bra             L_chunk;
L_end:
	ret;
}`)
	return p.b.String()
}
