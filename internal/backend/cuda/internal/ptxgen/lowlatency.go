package main

import "fmt"

// lowLatency is ptx/lowlatency.ptx: one kernel for all three ops (flags
// choose gather or sum; the stride chooses what each rank is sent). Rank
// k's vector lives in quad(k), as in the all-reduce, so the sum is the same
// code (sumQuads).
func lowLatency() string {
	p := ptx{abandon: true, params: pLLSize}
	p.header(fmt.Sprintf(`lowlatency.ptx: symmem's low-latency kernel for small messages: all-gather,
reduce-scatter and all-reduce (sum or avg of float32, bfloat16, float16) in
one push, without the ready and done round trips of allgather.ptx and
allreduce.ptx (PTX from internal/backend/cuda/internal/ptxgen, JIT-compiled
by the driver).

Lines: data and flag travel in the same store. A line is %[1]d bytes
{data u32, flag u32, data u32, flag u32}, written with one v4 store; each
8-byte half is written whole, so a reader that sees both flags equal to the
launch's epoch e sees both data words of that launch. Senders write only
into the LL area of each peer's pad (never its output), which is double
buffered: launch e writes half e&1, so a sender's launch e can only reach a
half its receiver's launch e-2 read, and that launch finished before the
receiver's launch e-1 started, which the sender's launch e-1 needed (it
received the receiver's lines of e-1, or its signals: every launch on the
group's shared epoch hears from every peer). Stale lines carry an older
epoch and never match.

Per call: CTA 0's thread k (k < n, k != me) announces the launch in peer
k's launch header (one 8-byte store {e, digest}: kernels of other paths
that wait there see a difference at once) and writes the row's header line
{digest, e, digest, e}; every thread sends its 16-byte vectors i = b*T +
tid (stride nb*T) of the input chunk for peer k (input + k*P.stride: 0 for
all-gather and all-reduce, the chunk for reduce-scatter) as two lines into
row me of peer k's half e&1. Then thread k of every CTA waits for row k's
header line and compares the digest (a difference: no output is written,
the kernel reports through P.fault like every kernel, and the group stays
usable); after a barrier each thread polls its lines of every row and
either copies row q to out + q*bytes (flagGather; its own input too with
flagOwn) or sums every rank's vector in rank order 0..n-1 (its own from its
input chunk me; float32, one rounding: sum.go) into out. Waits read P.stop
after 100 us and trap after P.timeout, as every kernel wait.

Bytes per row (P.bytes) are a multiple of 16 and buffers 16-byte aligned
(the host refuses other calls). Area of rank r: half h at LL + h*n*R, row q
at + q*R (R = P.row), line 0 the header, line 1+2i and 2+2i vector i.

Parameter block P (%[2]d bytes; kernel_layout.go):
  %[3]d in u64 | %[4]d bytes u64 (per row) | %[5]d region u64 (local) | %[6]d me u32 | %[7]d n u32
  %[8]d dtype u32 (0 float32, 1 bfloat16, 2 float16) | %[9]d flags u32 (%[10]d avg, %[11]d gather, %[12]d own)
  %[13]d LL areas[%[14]d] u64 (rank k's as mapped here) | %[15]d peer regions[%[14]d] u64
  %[16]d timeout u64 | %[17]d hash u32 | %[18]d fault u64 | %[19]d stop u64
  %[20]d out u64 | %[21]d stride u64 | %[22]d row bytes u64`,
		llLine, pLLSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, flagAvg, flagGather, flagOwn,
		pPtrs, maxRanks, pPeerRegs, pTimeout, pHash, pFault, pStop, pLLOut, pLLStride, pLLRow))
	p.w("")
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.f(".shared .align 8 .b64 sll[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.w("")
	p.entryTuned("symmem_lowlatency", fmt.Sprintf(".maxntid %d, 1, 1", threads), `	.reg .pred  %p<16>;
	.reg .pred  %q<8>;
	.reg .b16   %h<20>;
	.reg .b32   %r<72>;
	.reg .f32   %f<20>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.setup("Thread 0: peer regions and LL areas to shared memory, the epoch.", false, table{"sreg", pPeerRegs}, table{"sll", pPtrs})
	p.f(`	ld.shared.u32   %%r8, [sepoch];
	ld.param.u32    %%r16, [P+%d];                // flags
	ld.param.u64    %%rd4, [P+%d];                // R
	ld.param.u64    %%rd5, [P+%d];                // stride
	ld.param.u64    %%rd6, [P+%d];                // out
	and.b32         %%r11, %%r16, %d;
	setp.ne.u32     %%p10, %%r11, 0;                // %%p10: gather
	and.b32         %%r11, %%r16, %d;
	setp.ne.u32     %%p12, %%r11, 0;                // %%p12: copy the own input (gather, out of place)`,
		pFlags, pLLRow, pLLStride, pLLOut, flagGather, flagOwn)
	p.w(`	// Half e&1: hoff = (e&1)*n*R; this rank's row in a peer's half: hoff + me*R.
	cvt.u64.u32     %rd7, %r6;
	mul.lo.u64      %rd7, %rd7, %rd4;             // n*R
	and.b32         %r11, %r8, 1;
	setp.ne.u32     %p7, %r11, 0;
	selp.b64        %rd8, %rd7, 0, %p7;           // hoff
	cvt.u64.u32     %rd9, %r5;
	mul.lo.u64      %rd9, %rd9, %rd4;
	add.u64         %rd9, %rd9, %rd8;             // hoff + me*R
	mul.wide.u32    %rd10, %r5, 8;
	mov.u64         %rd11, sll;
	add.u64         %rd10, %rd10, %rd11;
	ld.shared.u64   %rd14, [%rd10];
	add.u64         %rd14, %rd14, %rd8;           // own area, half e&1: row q at + q*R
	cvt.u64.u32     %rd15, %r5;
	mul.lo.u64      %rd15, %rd15, %rd5;
	add.u64         %rd15, %rd15, %rd1;           // own chunk: in + me*stride
	cvt.u64.u32     %rd17, %r5;
	mul.lo.u64      %rd17, %rd17, %rd2;
	add.u64         %rd17, %rd17, %rd6;           // own slot of a gather: out + me*bytes
	shr.u64         %rd29, %rd2, 4;               // V vectors per row
	mul.wide.u32    %rd24, %r2, %r3;
	cvt.u64.u32     %rd25, %r1;
	add.u64         %rd24, %rd24, %rd25;          // i = b*T + tid
	mov.u64         %rd30, %rd24;
	mul.wide.u32    %rd26, %r4, %r3;              // S

	// CTA 0, thread k < n (k != me): the launch header in peer k's region
	// (one store: {e, digest}) and the header line of row me in its LL area.
	setp.ge.u32     %p2, %r1, %r6;
	setp.eq.or.u32  %p2, %r1, %r5, %p2;           // %p2: not a signalling thread
	setp.ne.u32     %p7, %r2, 0;
	or.pred         %p7, %p7, %p2;
	@%p7 bra        L_announced;
	mul.wide.u32    %rd18, %r1, 8;
	mov.u64         %rd19, sreg;
	add.u64         %rd19, %rd19, %rd18;
	ld.shared.u64   %rd19, [%rd19];               // peer k's region
	mul.wide.u32    %rd20, %r5, 8;
	add.u64         %rd19, %rd19, %rd20;`)
	p.f(`	mov.b64         %%rd20, {%%r8, %%r15};
	st.relaxed.sys.global.u64 [%%rd19+%d], %%rd20;  // header[me] = {e, digest}
	mov.u64         %%rd19, sll;
	add.u64         %%rd19, %%rd19, %%rd18;
	ld.shared.u64   %%rd19, [%%rd19];               // peer k's LL area
	add.u64         %%rd19, %%rd19, %%rd9;
	st.volatile.global.v4.u32 [%%rd19], {%%r15, %%r8, %%r15, %%r8};
L_announced:

	// Send: vector i of the chunk for peer k (in + k*stride) as lines 1+2i
	// and 2+2i of row me in peer k's half.
L_send:
	setp.ge.u64     %%p5, %%rd24, %%rd29;
	@%%p5 bra        L_sent;
	shl.b64         %%rd27, %%rd24, 4;              // 16i
	shl.b64         %%rd28, %%rd24, 5;
	add.u64         %%rd28, %%rd28, %d;             // line 1+2i
	mov.u32         %%r10, 0;
L_send_k:
	setp.ge.u32     %%p5, %%r10, %%r6;
	@%%p5 bra        L_send_next;
	setp.eq.u32     %%p5, %%r10, %%r5;
	@%%p5 bra        L_send_k_next;
	cvt.u64.u32     %%rd10, %%r10;
	mul.lo.u64      %%rd11, %%rd10, %%rd5;
	add.u64         %%rd11, %%rd11, %%rd1;
	add.u64         %%rd11, %%rd11, %%rd27;
	ld.global.v4.u32 {%%r21, %%r22, %%r23, %%r24}, [%%rd11];
	shl.b64         %%rd12, %%rd10, 3;
	mov.u64         %%rd13, sll;
	add.u64         %%rd12, %%rd12, %%rd13;
	ld.shared.u64   %%rd13, [%%rd12];
	add.u64         %%rd13, %%rd13, %%rd9;
	add.u64         %%rd13, %%rd13, %%rd28;
	st.volatile.global.v4.u32 [%%rd13], {%%r21, %%r8, %%r22, %%r8};
	st.volatile.global.v4.u32 [%%rd13+%d], {%%r23, %%r8, %%r24, %%r8};
L_send_k_next:
	add.u32         %%r10, %%r10, 1;
	bra             L_send_k;
L_send_next:
	add.u64         %%rd24, %%rd24, %%rd26;
	bra             L_send;
L_sent:`, rHeader, llLine, llLine)
	p.headerCheck()
	p.sumSetup()
	p.w(`
	// Receive: vector i of every row (rank k's in quad(k); this rank's
	// from its own chunk), then copy (gather) or sum.
	mov.u64         %rd46, %globaltimer;
	mov.u64         %rd24, %rd30;
L_recv:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_end;
	shl.b64         %rd27, %rd24, 4;              // 16i
	shl.b64         %rd28, %rd24, 5;`)
	p.f("\tadd.u64         %%rd28, %%rd28, %d;             // line 1+2i", llLine)
	for k := 0; k < maxRanks; k++ {
		p.receiveRank(k)
	}
	p.w(`	@%p10 bra       L_recv_next;`)
	p.sumQuads()
	p.w(`	add.u64         %rd36, %rd6, %rd27;
	st.global.v4.u32 [%rd36], {%r21, %r22, %r23, %r24};
L_recv_next:
	add.u64         %rd24, %rd24, %rd26;
	bra             L_recv;`)
	p.finish()
	p.faultExit()
	for k := 0; k < maxRanks; k++ {
		p.f("L_ab%d:", k)
		p.abandonReport("L_end", fmt.Sprint(k))
	}
	p.w("}")
	return p.b.String()
}

// headerCheck: thread k < n (k != me) of every CTA waits for the header
// line of row k in this rank's half and compares its digest; while it
// waits it also looks at the launch header peer k wrote here, so a peer
// that runs another kernel at this epoch (another path) is a difference at
// once. A difference or an abandoned wait goes to L_fault, as after
// signalReady.
func (p *ptx) headerCheck() {
	p.w(`
	// Thread k: row k's header line (this launch's, digest equal).
	@%p2 bra        L_hdr_done;
	cvt.u64.u32     %rd16, %r1;
	mul.lo.u64      %rd16, %rd16, %rd4;
	add.u64         %rd16, %rd16, %rd14;          // row k, line 0
	mul.wide.u32    %rd45, %r1, 8;
	add.u64         %rd45, %rd3, %rd45;`)
	p.f("\tadd.u64         %%rd45, %%rd45, %d;             // own header[k]", rHeader)
	p.w(`	mov.u64         %rd46, %globaltimer;
L_spin_hdr:
	ld.volatile.global.v4.u32 {%r11, %r13, %r12, %r14}, [%rd16];
	setp.eq.u32     %p4, %r13, %r8;
	setp.eq.and.u32 %p4, %r14, %r8, %p4;          // both halves of launch e
	@!%p4 bra       L_spin_hdr_wait;
	setp.ne.u32     %p7, %r11, %r15;
	@%p7 bra        L_hdr_bad;                    // another call: report, do not run
	bra             L_hdr_done;
L_spin_hdr_wait:
	ld.relaxed.sys.global.u64 %rd47, [%rd45];
	mov.b64         {%r13, %r11}, %rd47;          // {epoch, digest} peer k announced
	setp.ne.u32     %p7, %r13, %r8;
	setp.eq.or.u32  %p7, %r11, %r15, %p7;
	@!%p7 bra       L_hdr_bad;                    // another kernel at this launch`)
	p.trapAfterTimeout("L_spin_hdr", "L_hdr_abandon")
	p.w(`	bra             L_spin_hdr;
L_hdr_abandon:
	st.shared.u32   [sfault+4], %r1;
	st.shared.u32   [sfault+8], 0;
	st.shared.u32   [sfault], 2;                  // abandoned: the gate failed
	bra             L_hdr_done;
L_hdr_bad:
	st.shared.u32   [sfault+4], %r1;
	st.shared.u32   [sfault+8], %r11;
	st.shared.u32   [sfault], 1;
L_hdr_done:
	bar.sync        0;
	ld.shared.u32   %r11, [sfault];
	setp.ne.u32     %p7, %r11, 0;
	@%p7 bra        L_fault;`)
}

// receiveRank: rank k's vector i into quad(k): this rank's from its own
// chunk (copied to its slot when flagOwn), a peer's from its two lines
// (copied to out + k*bytes when flagGather). Ranks k >= n are skipped.
func (p *ptx) receiveRank(k int) {
	q := func(j int) string { return fmt.Sprintf("%%r%d", 21+4*k+j) }
	p.f("\t// Rank %d.", k)
	if k > 0 {
		p.f("\t@!%%q%d bra       L_r%d;", k, k)
	}
	p.f(`	setp.ne.u32     %%p11, %%r5, %d;
	@%%p11 bra       L_poll%d;
	add.u64         %%rd36, %%rd15, %%rd27;
	ld.global.v4.u32 %s, [%%rd36];
	@!%%p12 bra      L_r%d;
	add.u64         %%rd36, %%rd17, %%rd27;
	st.global.v4.u32 [%%rd36], %s;
	bra             L_r%d;
L_poll%d:
	mul.lo.u64      %%rd18, %%rd4, %d;
	add.u64         %%rd18, %%rd18, %%rd14;
	add.u64         %%rd18, %%rd18, %%rd28;         // row %d, line 1+2i`, k, k, quad(k), k, quad(k), k, k, k, k)
	for half, off := range []int{0, llLine} {
		loop := fmt.Sprintf("L_poll%d_%d", k, half)
		p.w(loop + ":")
		p.f("\tld.volatile.global.v4.u32 {%s, %%r69, %s, %%r70}, [%%rd18+%d];", q(2*half), q(2*half+1), off)
		p.w(`	setp.eq.u32     %p4, %r69, %r8;
	setp.eq.and.u32 %p4, %r70, %r8, %p4;`)
		p.f("\t@%%p4 bra        %s_ok;", loop)
		p.trapAfterTimeout(loop, fmt.Sprintf("L_ab%d", k))
		p.f("\tbra             %s;\n%s_ok:", loop, loop)
	}
	p.f(`	@!%%p10 bra      L_r%d;
	cvt.u64.u32     %%rd19, %d;
	mul.lo.u64      %%rd19, %%rd19, %%rd2;
	add.u64         %%rd19, %%rd19, %%rd6;
	add.u64         %%rd19, %%rd19, %%rd27;
	st.global.v4.u32 [%%rd19], %s;
L_r%d:`, k, k, quad(k), k)
}
