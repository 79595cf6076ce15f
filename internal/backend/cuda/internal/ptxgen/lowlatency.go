package main

import (
	"fmt"
	"strings"
)

func init() { register("ptx/lowlatency.ptx", lowLatency) }

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

Per call: each thread's first input vector is loaded before the setup
when every peer gets the same one (stride 0), so that load overlaps thread
0's read of the launch word. CTA 0's thread k (k < n, k != me) announces the launch in peer
k's launch header (one 8-byte store {e, digest}: kernels of other paths
that wait there see a difference at once) and writes the row's header line
{digest, e, digest, e}; every thread sends its 16-byte vectors i = b*T +
tid (stride nb*T) of the input chunk for peer k (input + k*P.stride: 0 for
all-gather and all-reduce, the chunk for reduce-scatter) as two lines into
row me of peer k's half e&1. Then each thread issues the loads of its
first vector's lines of every row, and, while they are in flight, thread
k of every CTA waits for row k's header line and compares its digest (and
looks at the launch header peer k wrote here: a peer running another
kernel at this launch); a difference makes the CTA write nothing and
report through P.fault after a barrier, as every kernel does, and the
group stays usable. Then each thread checks its lines' flags (a late
peer: a spin of its own) and copies row q to out + q*bytes (flagGather;
its own input too with flagOwn) or sums every rank's vector in rank order
0..n-1 (its own from its input chunk me; float32, one rounding: sum.go)
into out. Spins look at P.stop and the watchdog every 32 trips, as every
kernel wait does.

A one-CTA launch counts itself at its start (its thread 0 is the launch
word's only reader): no atomics or fences at its end. Larger launches count
their CTAs with a relaxed atomic and the last one writes the launch word
relaxed: every CTA read the word (into sepoch) before it counts, the next
launch reads it only after this one ended (stream order), and no reader of
this launch's data needs its order, so a release (which waits for the
remote stores' acknowledgements) buys nothing.

Bytes per row (P.bytes) are a multiple of 16 (the host refuses other
rows). Buffers off 16 bytes set the bytes flag: their 16-byte vectors are
loaded and stored byte by byte (the rows and lines stay 16-byte aligned). %[23]d threads per CTA: every rank's lines are
in registers at once. Area of rank r: half h at LL + h*n*R, row q
at + q*R (R = P.row), line 0 the header, line 1+2i and 2+2i vector i.

Parameter block P (%[2]d bytes; kernel_layout.go):
  %[3]d in u64 | %[4]d bytes u64 (per row) | %[5]d region u64 (local) | %[6]d me u32 | %[7]d n u32
  %[8]d dtype u32 (0 float32, 1 bfloat16, 2 float16) | %[9]d flags u32 (%[10]d avg, %[11]d gather, %[12]d own, %[24]d bytes)
  %[13]d LL areas[%[14]d] u64 (rank k's as mapped here) | %[15]d peer regions[%[14]d] u64
  %[16]d timeout u64 | %[17]d hash u32 | %[18]d fault u64 | %[19]d stop u64
  %[20]d out u64 | %[21]d stride u64 | %[22]d row bytes u64`,
		llLine, pLLSize, pA, pBytes, pRegion, pMe, pN, pMode, pFlags, flagAvg, flagGather, flagOwn,
		pPtrs, maxRanks, pPeerRegs, pTimeout, pHash, pFault, pStop, pLLOut, pLLStride, pLLRow, llThreads, flagBytes))
	p.w("")
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.f(".shared .align 8 .b64 sll[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.w("")
	p.entryTuned("symmem_lowlatency", fmt.Sprintf(".maxntid %d, 1, 1\n.minnctapersm 1", llThreads), `	.reg .pred  %p<20>;
	.reg .pred  %q<8>;
	.reg .b16   %h<20>;
	.reg .b32   %r<104>;
	.reg .f32   %f<20>;
	.reg .b64   %rd<48>;
	.reg .pred  %pb;                              // flagBytes: user buffers byte by byte
	.reg .b32   %b<4>;
`)
	p.loadParams()
	p.f(`	// Prefetch: this thread's first input vector when every peer gets the
	// same one (stride 0): its address needs no epoch, so the load is in
	// flight while thread 0 reads the launch word.
	ld.param.u64    %%rd5, [P+%d];
	setp.eq.u64     %%p14, %%rd5, 0;
	mul.wide.u32    %%rd24, %%r2, %%r3;
	cvt.u64.u32     %%rd25, %%r1;
	add.u64         %%rd24, %%rd24, %%rd25;
	shr.u64         %%rd29, %%rd2, 4;
	setp.lt.u64     %%p16, %%rd24, %%rd29;
	and.pred        %%p16, %%p16, %%p14;            // %%p16: the first vector is prefetched
	ld.param.u32    %%b0, [P+%d];
	and.b32         %%b0, %%b0, %d;
	setp.ne.u32     %%pb, %%b0, 0;                  // %%pb: byte mode (then no prefetch)
	@%%pb setp.ne.u32 %%p16, %%r1, %%r1;
	shl.b64         %%rd27, %%rd24, 4;
	add.u64         %%rd11, %%rd1, %%rd27;
	@%%p16 ld.global.v4.u32 {%%r21, %%r22, %%r23, %%r24}, [%%rd11];`, pLLStride, pFlags, flagBytes)
	p.setup("Thread 0: peer regions and LL areas to shared memory, the epoch.", false, table{"sreg", pPeerRegs}, table{"sll", pPtrs})
	p.f(`	// One CTA: its thread 0 is the launch word's only reader, so the
	// launch is counted now (no atomics or fences at the end).
	setp.ne.u32     %%p7, %%r4, 1;
	setp.ne.or.u32  %%p7, %%r1, 0, %%p7;
	@!%%p7 st.relaxed.gpu.global.u32 [%%rd3+%d], %%r8;
	ld.shared.u32   %%r8, [sepoch];
	ld.param.u32    %%r16, [P+%d];                // flags
	ld.param.u64    %%rd4, [P+%d];                // R
	ld.param.u64    %%rd5, [P+%d];                // stride
	ld.param.u64    %%rd6, [P+%d];                // out
	and.b32         %%r11, %%r16, %d;
	setp.ne.u32     %%p10, %%r11, 0;                // %%p10: gather
	and.b32         %%r11, %%r16, %d;
	setp.ne.u32     %%p12, %%r11, 0;                // %%p12: copy the own input (gather, out of place)
	setp.eq.u64     %%p14, %%rd5, 0;                // %%p14: every peer gets the same vector`,
		rLaunch, pFlags, pLLRow, pLLStride, pLLOut, flagGather, flagOwn)
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
	add.u64         %%rd11, %%rd1, %%rd27;
	@%%p16 bra       L_send_have;                  // prefetched
	@!%%p14 bra      L_send_have;
%s
L_send_have:
	setp.ne.u32     %%p16, %%r1, %%r1;              // later vectors load their own
	mov.u32         %%r10, 0;
L_send_k:
	setp.ge.u32     %%p5, %%r10, %%r6;
	@%%p5 bra        L_send_next;
	setp.eq.u32     %%p5, %%r10, %%r5;
	@%%p5 bra        L_send_k_next;
	cvt.u64.u32     %%rd10, %%r10;
	@%%p14 bra       L_send_loaded;
	mul.lo.u64      %%rd11, %%rd10, %%rd5;
	add.u64         %%rd11, %%rd11, %%rd1;
	add.u64         %%rd11, %%rd11, %%rd27;
%s
L_send_loaded:
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
L_sent:`, rHeader, llLine, llLoadVec(quad(0), "%rd11", "s1"), llLoadVec(quad(0), "%rd11", "s2"), llLine)
	p.sumSetup()
	p.w(`
	// Receive. The first vector's loads (rank k's in quad(k); this rank's
	// from its own chunk) go out before the header check, so they are in
	// flight while thread k waits for row k's header line.
	mov.u64         %rd46, 0;                     // the first slow poll starts the watchdog
	mov.u64         %rd24, %rd30;
	setp.lt.u64     %p13, %rd24, %rd29;           // %p13: this thread has a vector
	@!%p13 bra      L_first_issued;`)
	p.llOffsets()
	for k := 0; k < maxRanks; k++ {
		p.llLoad(k, "f")
	}
	p.w("L_first_issued:")
	p.headerCheck()
	p.w(`	@!%p13 bra      L_end;
	bra             L_have;
L_recv:
	setp.ge.u64     %p5, %rd24, %rd29;
	@%p5 bra        L_end;`)
	p.llOffsets()
	p.w("\t// Every rank's loads in flight at once.")
	for k := 0; k < maxRanks; k++ {
		p.llLoad(k, "")
	}
	p.w("L_have:\n\t// Every peer's flags (a late peer: its own spin, out of line).")
	for k := 0; k < maxRanks; k++ {
		p.llCheck(k)
	}
	p.w(`	@!%p10 bra      L_sum;`)
	for k := 0; k < maxRanks; k++ {
		p.llStore(k)
	}
	p.w(`	bra             L_recv_next;
L_sum:`)
	p.sumQuads()
	p.w(`	add.u64         %rd36, %rd6, %rd27;
` + llStoreVec("%rd36", quad(0), "sum") + `
L_recv_next:
	add.u64         %rd24, %rd24, %rd26;
	bra             L_recv;`)
	p.f(`L_end:
	setp.eq.u32     %%p7, %%r4, 1;
	@%%p7 bra        L_end_ret;                    // one CTA: counted at the start`)
	p.lastCTA("L_end_count", "relaxed", fmt.Sprintf("\tst.relaxed.gpu.global.u32 [%%rd3+%d], %%r8;   // this launch finished\nL_end_ret:\n\tret;", rLaunch))
	p.faultExit()
	for k := 0; k < maxRanks; k++ {
		p.llSpin(k)
	}
	for k := 0; k < maxRanks; k++ {
		p.f("L_ab%d:", k)
		p.abandonReport("L_end", fmt.Sprint(k))
	}
	p.w("}")
	return p.b.String()
}

// llOffsets: the offsets of vector i (%rd24): 16i in the chunk (%rd27),
// its first line in a row (%rd28).
func (p *ptx) llOffsets() {
	p.f(`	shl.b64         %%rd27, %%rd24, 4;              // 16i
	shl.b64         %%rd28, %%rd24, 5;
	add.u64         %%rd28, %%rd28, %d;             // line 1+2i`, llLine)
}

// The receive's registers per rank k: its vector in quad(k), its lines'
// four flags in %r(72+4k)..%r(75+4k).
func llFlag(k, j int) string { return fmt.Sprintf("%%r%d", 72+4*k+j) }

// llPeerOnly skips to skip unless rank k exists and is not this rank.
func (p *ptx) llPeerOnly(k int, skip string) {
	if k > 0 {
		p.f("\t@!%%q%d bra       %s;", k, skip)
	}
	p.f("\tsetp.eq.u32     %%p15, %%r5, %d;\n\t@%%p15 bra       %s;", k, skip)
}

// llLoad issues rank k's loads of vector i: this rank's from its own
// chunk, a peer's two lines from row k (tag makes its labels unique).
func (p *ptx) llLoad(k int, tag string) {
	if k > 0 {
		p.f("\t@!%%q%d bra       L_ld%s%d;", k, tag, k)
	}
	p.f(`	setp.ne.u32     %%p15, %%r5, %d;
	@%%p15 bra       L_ld%s%d_peer;
	add.u64         %%rd36, %%rd15, %%rd27;
%s
	bra             L_ld%s%d;
L_ld%s%d_peer:`, k, tag, k, llLoadVec(quad(k), "%rd36", fmt.Sprintf("l%s%d", tag, k)), tag, k, tag, k)
	p.llLines(k)
	p.f("L_ld%s%d:", tag, k)
}

// llLines loads rank k's two lines of vector i into quad(k) and its flags.
func (p *ptx) llLines(k int) {
	q := func(j int) string { return fmt.Sprintf("%%r%d", 21+4*k+j) }
	p.f(`	mul.lo.u64      %%rd18, %%rd4, %d;
	add.u64         %%rd18, %%rd18, %%rd14;
	add.u64         %%rd18, %%rd18, %%rd28;         // row %d, line 1+2i
	ld.volatile.global.v4.u32 {%s, %s, %s, %s}, [%%rd18];
	ld.volatile.global.v4.u32 {%s, %s, %s, %s}, [%%rd18+%d];`,
		k, k, q(0), llFlag(k, 0), q(1), llFlag(k, 1), q(2), llFlag(k, 2), q(3), llFlag(k, 3), llLine)
}

// llReady sets %p4: rank k's lines carry this launch's epoch.
func (p *ptx) llReady(k int) {
	p.f(`	setp.eq.u32     %%p4, %s, %%r8;
	setp.eq.and.u32 %%p4, %s, %%r8, %%p4;
	setp.eq.and.u32 %%p4, %s, %%r8, %%p4;
	setp.eq.and.u32 %%p4, %s, %%r8, %%p4;`, llFlag(k, 0), llFlag(k, 1), llFlag(k, 2), llFlag(k, 3))
}

// llCheck goes to rank k's spin when its lines are not there yet; the spin
// comes back to L_ck%d.
func (p *ptx) llCheck(k int) {
	p.llPeerOnly(k, fmt.Sprintf("L_ck%d", k))
	p.llReady(k)
	p.f("\t@!%%p4 bra       L_spin%d;\nL_ck%d:", k, k)
}

// spinSlow counts a failed trip of a spin in %r71 and, every 32nd trip,
// falls through to the slow checks (the caller's); else it goes to loop.
func (p *ptx) spinSlow(loop string) {
	p.f(`	add.u32         %%r71, %%r71, 1;
	and.b32         %%r70, %%r71, 31;
	setp.ne.u32     %%p15, %%r70, 0;
	@%%p15 bra       %s;
	setp.eq.u64     %%p15, %%rd46, 0;
	@%%p15 mov.u64   %%rd46, %%globaltimer;           // the first slow trip starts the watchdog`, loop)
}

// llSpin is rank k's wait, out of line: its lines again until they carry
// the epoch; every 32 trips it also looks at P.stop and the watchdog.
func (p *ptx) llSpin(k int) {
	loop := fmt.Sprintf("L_spin%d_loop", k)
	p.f("L_spin%d:\n\tmov.u32         %%r71, 0;\n%s:", k, loop)
	p.llLines(k)
	p.llReady(k)
	p.f("\t@%%p4 bra        L_ck%d;", k)
	p.spinSlow(loop)
	p.trapAfterTimeout(loop, fmt.Sprintf("L_ab%d", k))
	p.f("\tbra             %s;", loop)
}

// headerCheck: thread k < n (k != me) of every CTA waits for the header
// line of row k in this rank's half and compares its digest; every 32
// trips it also looks at the launch header peer k wrote here (a peer that
// runs another kernel at this launch: a difference at once), at P.stop and
// at the watchdog. One thread per CTA and peer polls the line (every
// thread polling one address slowed 32-CTA calls 30-fold). A difference or
// an abandoned wait goes to L_fault after the barrier, as after
// signalReady: no output is written.
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
	p.w(`	mov.u32         %r71, 0;
L_spin_hdr:
	ld.volatile.global.v2.u32 {%r11, %r13}, [%rd16];
	setp.ne.u32     %p4, %r13, %r8;
	@%p4 bra        L_spin_hdr_wait;
	setp.ne.u32     %p7, %r11, %r15;
	@%p7 bra        L_hdr_bad;                    // another call: report, do not run
	bra             L_hdr_done;
L_spin_hdr_wait:`)
	p.spinSlow("L_spin_hdr")
	p.w(`	ld.relaxed.sys.global.u64 %rd47, [%rd45];
	mov.b64         {%r13, %r11}, %rd47;          // {epoch, digest} peer k announced
	setp.ne.u32     %p7, %r13, %r8;
	setp.eq.or.u32  %p7, %r11, %r15, %p7;
	@!%p7 bra       L_hdr_bad;                    // another kernel at this launch`)
	p.trapAfterTimeout("L_spin_hdr", "L_hdr_abandon")
	p.w(`	bra             L_spin_hdr;`)
	p.verdict("hdr")
}

// llStore writes rank k's vector of a gather: a peer's to out + k*bytes,
// this rank's own to its slot when flagOwn.
func (p *ptx) llStore(k int) {
	if k > 0 {
		p.f("\t@!%%q%d bra       L_st%d;", k, k)
	}
	p.f(`	setp.ne.u32     %%p15, %%r5, %d;
	@%%p15 bra       L_st%d_peer;
	@!%%p12 bra      L_st%d;
	add.u64         %%rd36, %%rd17, %%rd27;
%s
	bra             L_st%d;
L_st%d_peer:
	cvt.u64.u32     %%rd19, %d;
	mul.lo.u64      %%rd19, %%rd19, %%rd2;
	add.u64         %%rd19, %%rd19, %%rd6;
	add.u64         %%rd19, %%rd19, %%rd27;
%s
L_st%d:`, k, k, k, llStoreVec("%rd36", quad(k), fmt.Sprintf("o%d", k)), k, k, k, llStoreVec("%rd19", quad(k), fmt.Sprintf("p%d", k)), k)
}

// llLoadVec is the load of a user buffer's 16 bytes at addr into regs (a
// quad): one v4 load, or in byte mode (%pb: a buffer off 16 bytes) 16
// byte loads packed into the four words (tag makes its labels unique).
func llLoadVec(regs, addr, tag string) string {
	w := strings.Split(strings.Trim(regs, "{}"), ", ")
	return vecOrBytes("lb_"+tag, fmt.Sprintf("ld.global.v4.u32 %s, [%s];", regs, addr), func(b *strings.Builder) {
		for j := 0; j < 16; j++ {
			if j%4 == 0 {
				fmt.Fprintf(b, "\tld.global.u8     %s, [%s+%d];\n", w[j/4], addr, j)
				continue
			}
			fmt.Fprintf(b, "\tld.global.u8     %%b1, [%s+%d];\n", addr, j)
			fmt.Fprintf(b, "\tbfi.b32         %s, %%b1, %s, %d, 8;\n", w[j/4], w[j/4], 8*(j%4))
		}
	})
}

// llStoreVec is the store of regs (a quad) to a user buffer's 16 bytes at
// addr: one v4 store, or in byte mode 16 byte stores.
func llStoreVec(addr, regs, tag string) string {
	w := strings.Split(strings.Trim(regs, "{}"), ", ")
	return vecOrBytes("sb_"+tag, fmt.Sprintf("st.global.v4.u32 [%s], %s;", addr, regs), func(b *strings.Builder) {
		for j := 0; j < 16; j++ {
			src := w[j/4]
			if j%4 != 0 {
				fmt.Fprintf(b, "\tshr.u32         %%b1, %s, %d;\n", w[j/4], 8*(j%4))
				src = "%b1"
			}
			fmt.Fprintf(b, "\tst.global.u8     [%s+%d], %s;\n", addr, j, src)
		}
	})
}

// vecOrBytes is vec (one instruction) outside byte mode, else what bytes
// writes, under labels L_<label> and L_<label>_done.
func vecOrBytes(label, vec string, bytes func(b *strings.Builder)) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t@%%pb bra        L_%s;\n\t%s\n\tbra             L_%s_done;\nL_%s:\n", label, vec, label, label)
	bytes(&b)
	fmt.Fprintf(&b, "L_%s_done:", label)
	return b.String()
}
