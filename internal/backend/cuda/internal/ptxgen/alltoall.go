package main

import (
	"bytes"
	"fmt"
	"go/format"
)

func init() {
	register("ptx/alltoall.ptx", allToAll)
	generators["alltoall_layout.go"] = goAllToAllLayout
}

// The all-to-all kernel's block: the shared header (pA its input, pBytes
// the equal form's block bytes, pMode the form, pPtrs rank k's output as
// mapped here, pPeerRegs rank k's signal region), then its own fields.
const (
	pA2AElem    = pSize                 // u32: element size
	pA2AInCap   = pSize + 8             // u64: this rank's input capacity, elements
	pA2AOutCap  = pSize + 16            // u64: its output capacity, elements
	pA2ADev     = pSize + 24            // u64: device form: this rank's split counts (n int64)
	pA2ADevOut  = pSize + 32            // u64: device form: splitsOut (2n int64)
	pA2ASend    = pSize + 40            // [maxRanks]u64: host form: elements sent to rank k
	pA2ARecv    = pA2ASend + 8*maxRanks // [maxRanks]u64: host form: elements expected from rank k
	pA2ASize    = pA2ARecv + 8*maxRanks
	formEqual   = 0                  // P.mode: equal blocks (pBytes each)
	formHost    = 1                  // split counts in P
	formDevice  = 2                  // split counts in device memory (pA2ADev)
	rCounts     = 8192               // region offset of the two count slots (past rSize)
	cSend       = 16                 // slot: inCap u64, outCap u64, send[maxRanks] u64, recv[maxRanks] u64
	cRecv       = cSend + 8*maxRanks // ...
	cSlot       = cRecv + 8*maxRanks // one slot's bytes
	a2aVecShift = 4                  // 16-byte vectors
)

// What a split-count report says (fault word fMine; kindSplits).
const (
	splitsDiffer   = 0 // rank fPeer sends X to rank fTheirs, which expects Y
	splitsIn       = 1 // rank fPeer's counts reach X elements, its input holds Y
	splitsOut      = 2 // rank fPeer would receive X elements, its output holds Y
	splitsNegative = 3 // rank fPeer's count for rank fTheirs is X (< 0)
)

// allToAll is ptx/alltoall.ptx.
func allToAll() string {
	p := ptx{abandon: true, params: pA2ASize}
	p.header(fmt.Sprintf(`alltoall.ptx: symmem's SM all-to-all (PTX from internal/backend/cuda/internal/ptxgen,
JIT-compiled by the driver at group creation; no CUDA toolkit needed).

Push: every rank writes its block for rank k straight into rank k's output
through the peer mapping (its own block into its own output), then tells
each peer it is done; a rank's launch ends when every peer told it. Every
CTA strides over every block (thread i of the grid moves units i, i+S, ...),
the peers visited from me+1 on so that the ranks do not all start on the
same one. A block moves in 16-byte vectors when its source, destination
and length are multiples of 16, else byte by byte.

The forms (P.mode): 0 equal blocks of P.bytes; 1 split counts from the
host (P.send, P.recv); 2 split counts in device memory (P.dev, n int64,
written before the launch). With counts, thread 0 of each CTA writes this
rank's capacities and counts into a count slot of its region (two slots,
by launch parity) before the ready signal; after it, thread 0 reads every
rank's slot through the peer regions, checks the whole matrix, and plans
the blocks: every rank checks the same slots, so every rank finds the same
first fault, reports it through P.fault (kind %[1]d: split counts; fMine
says what, fPeer and fTheirs the ranks, words %[2]d and %[3]d two u64
values) and ends without moving data or sending done, which keeps the
epochs in step. Host form: what rank i sends rank j must be what j
expects. Device form: no count below zero, no rank reads past its input or
writes past its output (P.incap, P.outcap); CTA 0 writes splitsOut
(P.devout: the elements received from each rank, then each block's element
offset in the output).

Signals, digest, watchdog and the gate's failed word as in allgather.ptx
(the same fragments and region).

Parameter block P (%[4]d bytes; alltoall_layout.go), past the shared header:
  %[5]d elem u32 | %[6]d incap u64 | %[7]d outcap u64 | %[8]d dev u64 | %[9]d devout u64
  %[10]d send[%[12]d] u64 | %[11]d recv[%[12]d] u64
Count slot at region+%[13]d+(e&1)*%[14]d: incap, outcap, send[%[12]d], recv[%[12]d] u64.`,
		kindSplits, 4*fX, 4*fY, pA2ASize, pA2AElem, pA2AInCap, pA2AOutCap, pA2ADev, pA2ADevOut, pA2ASend, pA2ARecv, maxRanks, rCounts, cSlot))
	p.w(`
// Peer regions and outputs (indexable by rank), the epoch, and the plan:
// per target, source and destination addresses, bytes, unit.`)
	for _, s := range []string{"sreg", "sout", "ssrc", "sdst", "scnt"} {
		p.f(".shared .align 8 .b64 %s[%d];", s, maxRanks)
	}
	p.f(".shared .align 4 .b32 sunit[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.w("")
	p.entry("symmem_alltoall", `	.reg .pred  %p<12>;
	.reg .b32   %r<48>;
	.reg .b64   %rd<80>;
`)
	p.loadParams()
	p.setup("Thread 0: peer regions and outputs to shared memory (indexable), the epoch.", false,
		table{"sreg", pPeerRegs}, table{"sout", pPtrs})
	p.publishCounts()
	p.signalReady("Thread k < n (k != me) talks to peer k: signal ready, wait for its.", "sreg")
	p.plan()
	p.a2aCopy()
	p.w(`L_copied:
	// Every thread's stores precede the signalling threads' release (the
	// barrier, then a system-scope fence: release is cumulative).`)
	p.signalDone(true, "L_end")
	p.finish()
	p.faultExit()
	p.w("}")
	return p.b.String()
}

// slotOf: %rd(dst) = rank idx's count slot of this launch (%rd55: rCounts
// plus the parity's offset), through the peer regions.
func (p *ptx) slotOf(dst int, idx string) {
	p.f(`	mul.wide.u32    %%rd56, %s, 8;
	mov.u64         %%rd57, sreg;
	add.u64         %%rd57, %%rd57, %%rd56;
	ld.shared.u64   %%rd%d, [%%rd57];
	add.u64         %%rd%[2]d, %%rd%[2]d, %%rd55;`, idx, dst)
}

// publishCounts: with counts, thread 0 writes this rank's slot (this
// launch's parity, %rd55 for everyone after) before the barrier that
// precedes the ready signal; the fence orders the slot before it.
func (p *ptx) publishCounts() {
	p.f(`
	// The count slot of this launch: rCounts + (e&1)*cSlot (every thread).
	ld.shared.u32   %%r8, [sepoch];
	and.b32         %%r30, %%r8, 1;
	mul.wide.u32    %%rd55, %%r30, %d;
	add.u64         %%rd55, %%rd55, %d;
	setp.eq.u32     %%p8, %%r7, %d;
	@%%p8 bra        L_published;                  // equal blocks: no counts
	setp.ne.u32     %%p1, %%r1, 0;
	@%%p1 bra        L_published;
	// Thread 0: capacities and counts into this rank's slot (every CTA
	// writes the same values; a peer's CTA b reads it after CTA b's ready).
	add.u64         %%rd50, %%rd3, %%rd55;
	ld.param.u64    %%rd51, [P+%d];
	st.global.u64   [%%rd50], %%rd51;
	ld.param.u64    %%rd51, [P+%d];
	st.global.u64   [%%rd50+8], %%rd51;
	setp.eq.u32     %%p8, %%r7, %d;
	@%%p8 bra        L_pub_dev;`, cSlot, rCounts, formEqual, pA2AInCap, pA2AOutCap, formDevice)
	for k := 0; k < maxRanks; k++ {
		p.f("\tld.param.u64    %%rd51, [P+%d];\n\tst.global.u64   [%%rd50+%d], %%rd51;", pA2ASend+8*k, cSend+8*k)
		p.f("\tld.param.u64    %%rd51, [P+%d];\n\tst.global.u64   [%%rd50+%d], %%rd51;", pA2ARecv+8*k, cRecv+8*k)
	}
	p.f(`	bra             L_pub_fence;
L_pub_dev:
	// Device form: the n counts this rank sends, from P.dev (its stream
	// wrote them before the launch).
	ld.param.u64    %%rd52, [P+%d];
	mov.u32         %%r31, 0;
L_pub_dev_loop:
	setp.ge.u32     %%p8, %%r31, %%r6;
	@%%p8 bra        L_pub_fence;
	mul.wide.u32    %%rd53, %%r31, 8;
	add.u64         %%rd54, %%rd52, %%rd53;
	ld.global.u64   %%rd51, [%%rd54];
	add.u64         %%rd54, %%rd50, %%rd53;
	st.global.u64   [%%rd54+%d], %%rd51;
	add.u32         %%r31, %%r31, 1;
	bra             L_pub_dev_loop;
L_pub_fence:
	fence.sc.sys;                                 // the slot before the ready signal
L_published:
	bar.sync        0;`, pA2ADev, cSend)
}

// plan: thread 0 checks the counts (with them) and writes the blocks'
// addresses, bytes and units to shared memory; a fault found is reported
// (splitsReport) and every thread of the CTA ends through L_end.
func (p *ptx) plan() {
	p.f(`
	// Thread 0: the plan. %%rd60 = element size.
	setp.ne.u32     %%p1, %%r1, 0;
	@%%p1 bra        L_plan_done;
	ld.param.u32    %%r32, [P+%d];
	cvt.u64.u32     %%rd60, %%r32;
	setp.ne.u32     %%p8, %%r7, %d;
	@%%p8 bra        L_counts;
	// Equal blocks: target k gets in + k*bytes at out_k + me*bytes.
	cvt.u64.u32     %%rd61, %%r5;
	mul.lo.u64      %%rd61, %%rd61, %%rd2;`, pA2AElem, formEqual)
	for k := 0; k < maxRanks; k++ {
		p.f(`	mul.lo.u64      %%rd62, %%rd2, %[1]d;
	add.u64         %%rd62, %%rd62, %%rd1;
	ld.shared.u64   %%rd63, [sout+%[2]d];
	add.u64         %%rd63, %%rd63, %%rd61;
	st.shared.u64   [ssrc+%[2]d], %%rd62;
	st.shared.u64   [sdst+%[2]d], %%rd63;
	st.shared.u64   [scnt+%[2]d], %%rd2;`, k, 8*k)
	}
	p.w("\tbra             L_units;")
	p.checkCounts()
	p.planCounts()
	p.w(`L_units:
	// Units: 16 where source, destination and bytes are multiples of 16.`)
	for k := 0; k < maxRanks; k++ {
		p.f(`	ld.shared.u64   %%rd62, [ssrc+%[1]d];
	ld.shared.u64   %%rd63, [sdst+%[1]d];
	ld.shared.u64   %%rd64, [scnt+%[1]d];
	or.b64          %%rd62, %%rd62, %%rd63;
	or.b64          %%rd62, %%rd62, %%rd64;
	and.b64         %%rd62, %%rd62, 15;
	setp.eq.u64     %%p8, %%rd62, 0;
	selp.u32        %%r33, 16, 1, %%p8;
	st.shared.u32   [sunit+%d], %%r33;`, 8*k, 4*k)
	}
	p.w("\tbra             L_plan_done;")
	p.splitsReport()
	p.w(`L_plan_done:
	bar.sync        0;
	ld.shared.u32   %r11, [sfault];
	setp.ne.u32     %p7, %r11, 0;
	@%p7 bra        L_end;                        // the counts are wrong: nothing moves`)
}

// checkCounts is L_counts (thread 0): the whole matrix from every rank's
// slot, %rd58 rank i's, %rd59 rank j's. A fault goes to L_splits_bad with
// %r40 what, %r41 i, %r42 j, %rd70 X, %rd71 Y.
func (p *ptx) checkCounts() {
	p.f(`L_counts:
	setp.eq.u32     %%p8, %%r7, %d;
	@%%p8 bra        L_check_dev;
	// Host form: send_i[j] == recv_j[i] for every i, j.
	mov.u32         %%r40, %d;
	mov.u32         %%r41, 0;
L_hi:
	setp.ge.u32     %%p8, %%r41, %%r6;
	@%%p8 bra        L_checked;`, formDevice, splitsDiffer)
	p.slotOf(58, "%r41")
	p.w("\tmov.u32         %r42, 0;\nL_hj:\n\tsetp.ge.u32     %p8, %r42, %r6;\n\t@%p8 bra        L_hi_next;")
	p.slotOf(59, "%r42")
	p.f(`	mul.wide.u32    %%rd56, %%r42, 8;
	add.u64         %%rd56, %%rd56, %%rd58;
	ld.relaxed.sys.global.u64 %%rd70, [%%rd56+%d];
	mul.wide.u32    %%rd56, %%r41, 8;
	add.u64         %%rd56, %%rd56, %%rd59;
	ld.relaxed.sys.global.u64 %%rd71, [%%rd56+%d];
	setp.ne.u64     %%p8, %%rd70, %%rd71;
	@%%p8 bra        L_splits_bad;
	add.u32         %%r42, %%r42, 1;
	bra             L_hj;
L_hi_next:
	add.u32         %%r41, %%r41, 1;
	bra             L_hi;
L_check_dev:
	// Device form: every count >= 0 and at most the sender's input (so the
	// sums below cannot overflow), every row's sum within the sender's
	// input, every column's within the receiver's output.
	mov.u32         %%r41, 0;
L_di:
	setp.ge.u32     %%p8, %%r41, %%r6;
	@%%p8 bra        L_dcols;`, cSend, cRecv)
	p.slotOf(58, "%r41")
	p.f(`	ld.relaxed.sys.global.u64 %%rd71, [%%rd58];      // rank i's input capacity
	mov.u64         %%rd72, 0;
	mov.u32         %%r42, 0;
L_dj:
	setp.ge.u32     %%p8, %%r42, %%r6;
	@%%p8 bra        L_di_next;
	mul.wide.u32    %%rd56, %%r42, 8;
	add.u64         %%rd56, %%rd56, %%rd58;
	ld.relaxed.sys.global.u64 %%rd70, [%%rd56+%d];
	mov.u32         %%r40, %d;
	setp.lt.s64     %%p8, %%rd70, 0;
	@%%p8 bra        L_splits_bad;
	mov.u32         %%r40, %d;
	setp.gt.u64     %%p8, %%rd70, %%rd71;
	@%%p8 bra        L_splits_bad;
	add.u64         %%rd72, %%rd72, %%rd70;
	mov.u64         %%rd70, %%rd72;
	setp.gt.u64     %%p8, %%rd72, %%rd71;
	@%%p8 bra        L_splits_bad;
	add.u32         %%r42, %%r42, 1;
	bra             L_dj;
L_di_next:
	add.u32         %%r41, %%r41, 1;
	bra             L_di;
L_dcols:
	mov.u32         %%r40, %d;
	mov.u32         %%r42, 0;
	mov.u32         %%r41, 0;
L_ci:
	setp.ge.u32     %%p8, %%r41, %%r6;
	@%%p8 bra        L_checked;`, cSend, splitsNegative, splitsIn, splitsOut)
	p.slotOf(58, "%r41")
	p.f(`	ld.relaxed.sys.global.u64 %%rd71, [%%rd58+8];    // rank i's output capacity
	mov.u64         %%rd70, 0;
	mul.wide.u32    %%rd73, %%r41, 8;
	mov.u32         %%r43, 0;
L_cj:
	setp.ge.u32     %%p8, %%r43, %%r6;
	@%%p8 bra        L_ci_check;`)
	p.slotOf(59, "%r43")
	p.f(`	add.u64         %%rd56, %%rd59, %%rd73;
	ld.relaxed.sys.global.u64 %%rd74, [%%rd56+%d];
	add.u64         %%rd70, %%rd70, %%rd74;
	add.u32         %%r43, %%r43, 1;
	bra             L_cj;
L_ci_check:
	setp.gt.u64     %%p8, %%rd70, %%rd71;
	@%%p8 bra        L_splits_bad;
	add.u32         %%r41, %%r41, 1;
	bra             L_ci;
L_checked:`, cSend)
}

// planCounts (thread 0, counts checked): target k gets this rank's
// send[k] elements from in + (send[0] + ... + send[k-1]) at out_k +
// (rank 0's send[k] + ... + rank me-1's); CTA 0 of the device form also
// writes splitsOut.
func (p *ptx) planCounts() {
	p.w("\tmov.u64         %rd65, 0;                      // this rank's running source offset (elements)\n\tmov.u32         %r41, 0;\nL_pk:\n\tsetp.ge.u32     %p8, %r41, %r6;\n\t@%p8 bra        L_splitsout;")
	p.slotOf(58, "%r5")
	p.f(`	mul.wide.u32    %%rd73, %%r41, 8;
	add.u64         %%rd56, %%rd58, %%rd73;
	ld.relaxed.sys.global.u64 %%rd66, [%%rd56+%d];   // send[k]
	mov.u64         %%rd67, 0;                      // destination offset in rank k's output
	mov.u32         %%r43, 0;
L_pi:
	setp.ge.u32     %%p8, %%r43, %%r5;
	@%%p8 bra        L_pi_done;`, cSend)
	p.slotOf(59, "%r43")
	p.f(`	add.u64         %%rd56, %%rd59, %%rd73;
	ld.relaxed.sys.global.u64 %%rd74, [%%rd56+%d];
	add.u64         %%rd67, %%rd67, %%rd74;
	add.u32         %%r43, %%r43, 1;
	bra             L_pi;
L_pi_done:
	mov.u64         %%rd62, ssrc;
	add.u64         %%rd62, %%rd62, %%rd73;
	mul.lo.u64      %%rd63, %%rd65, %%rd60;
	add.u64         %%rd63, %%rd63, %%rd1;
	st.shared.u64   [%%rd62], %%rd63;
	mov.u64         %%rd62, sout;
	add.u64         %%rd62, %%rd62, %%rd73;
	ld.shared.u64   %%rd63, [%%rd62];
	mul.lo.u64      %%rd64, %%rd67, %%rd60;
	add.u64         %%rd63, %%rd63, %%rd64;
	mov.u64         %%rd62, sdst;
	add.u64         %%rd62, %%rd62, %%rd73;
	st.shared.u64   [%%rd62], %%rd63;
	mov.u64         %%rd62, scnt;
	add.u64         %%rd62, %%rd62, %%rd73;
	mul.lo.u64      %%rd64, %%rd66, %%rd60;
	st.shared.u64   [%%rd62], %%rd64;
	add.u64         %%rd65, %%rd65, %%rd66;
	add.u32         %%r41, %%r41, 1;
	bra             L_pk;
L_splitsout:
	// Device form, CTA 0: splitsOut = the elements from each rank i
	// (rank i's send[me]), then their offsets (packed in rank order).
	setp.ne.u32     %%p8, %%r7, %d;
	setp.ne.or.u32  %%p8, %%r2, 0, %%p8;
	@%%p8 bra        L_units;
	ld.param.u64    %%rd75, [P+%d];
	cvt.u64.u32     %%rd76, %%r6;
	shl.b64         %%rd76, %%rd76, 3;              // n*8: the offsets' half
	mul.wide.u32    %%rd73, %%r5, 8;
	mov.u64         %%rd67, 0;
	mov.u32         %%r43, 0;
L_so:
	setp.ge.u32     %%p8, %%r43, %%r6;
	@%%p8 bra        L_units;`, cSend, formDevice, pA2ADevOut)
	p.slotOf(59, "%r43")
	p.f(`	add.u64         %%rd56, %%rd59, %%rd73;
	ld.relaxed.sys.global.u64 %%rd74, [%%rd56+%d];
	mul.wide.u32    %%rd56, %%r43, 8;
	add.u64         %%rd56, %%rd56, %%rd75;
	st.global.u64   [%%rd56], %%rd74;
	add.u64         %%rd56, %%rd56, %%rd76;
	st.global.u64   [%%rd56], %%rd67;
	add.u64         %%rd67, %%rd67, %%rd74;
	add.u32         %%r43, %%r43, 1;
	bra             L_so;`, cSend)
}

// splitsReport is L_splits_bad (thread 0): the first CTA of the launch to
// get here writes the report (kindSplits; set cleared first, set last, as
// writeReport), and the CTA ends (sfault) after the plan's barrier.
func (p *ptx) splitsReport() {
	p.f(`L_splits_bad:
	st.shared.u32   [sfault], 4;
	atom.relaxed.gpu.global.exch.b32 %%r11, [%%rd3+%d], %%r8;
	setp.eq.u32     %%p7, %%r11, %%r8;
	@%%p7 bra        L_plan_done;                  // another CTA reported this launch
	ld.param.u64    %%rd39, [P+%d];
	st.relaxed.sys.global.u32 [%%rd39+%d], 0;
	fence.sc.sys;                                 // fields follow: set reads 0 meanwhile
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r41;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r42;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r40;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r8;
	st.relaxed.sys.global.u32 [%%rd39+%d], %d;
	mov.b64         {%%r44, %%r45}, %%rd70;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r44;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r45;
	mov.b64         {%%r44, %%r45}, %%rd71;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r44;
	st.relaxed.sys.global.u32 [%%rd39+%d], %%r45;
	or.b32          %%r11, %%r8, %d;
	st.release.sys.global.u32 [%%rd39+%d], %%r11;
	bra             L_plan_done;`, rReported, pFault, 4*fSet, 4*fPeer, 4*fTheirs, 4*fMine, 4*fEpoch, 4*fKind, kindSplits,
		4*fX, 4*fX+4, 4*fY, 4*fY+4, 1<<31, 4*fSet)
}

// a2aCopy: every thread, every target k = (me+1+t) % n: units i = b*T +
// tid, i+S, ... of its block (16-byte vectors or bytes, sunit).
func (p *ptx) a2aCopy() {
	p.w(`
	// The copy: gid = b*T + tid, stride S = nb*T, targets from me+1 on.
	mul.wide.u32    %rd68, %r2, %r3;
	cvt.u64.u32     %rd69, %r1;
	add.u64         %rd68, %rd68, %rd69;
	mul.wide.u32    %rd69, %r4, %r3;
	mov.u32         %r34, 0;
L_target:
	setp.ge.u32     %p8, %r34, %r6;
	@%p8 bra        L_copied;
	add.u32         %r35, %r5, %r34;
	add.u32         %r35, %r35, 1;
	rem.u32         %r35, %r35, %r6;               // k
	mul.wide.u32    %rd73, %r35, 8;
	mov.u64         %rd62, ssrc;
	add.u64         %rd62, %rd62, %rd73;
	ld.shared.u64   %rd63, [%rd62];                // source
	mov.u64         %rd62, sdst;
	add.u64         %rd62, %rd62, %rd73;
	ld.shared.u64   %rd64, [%rd62];                // destination
	mov.u64         %rd62, scnt;
	add.u64         %rd62, %rd62, %rd73;
	ld.shared.u64   %rd65, [%rd62];                // bytes
	mul.wide.u32    %rd73, %r35, 4;
	mov.u64         %rd62, sunit;
	add.u64         %rd62, %rd62, %rd73;
	ld.shared.u32   %r36, [%rd62];
	mov.u64         %rd66, %rd68;                  // i
	setp.ne.u32     %p8, %r36, 16;
	@%p8 bra        L_bytes;
	shr.u64         %rd65, %rd65, 4;               // vectors
L_vec:
	setp.ge.u64     %p8, %rd66, %rd65;
	@%p8 bra        L_next;
	shl.b64         %rd67, %rd66, 4;
	add.u64         %rd70, %rd63, %rd67;
	ld.global.v4.u32 {%r21, %r22, %r23, %r24}, [%rd70];
	add.u64         %rd70, %rd64, %rd67;
	st.global.v4.u32 [%rd70], {%r21, %r22, %r23, %r24};
	add.u64         %rd66, %rd66, %rd69;
	bra             L_vec;
L_bytes:
	setp.ge.u64     %p8, %rd66, %rd65;
	@%p8 bra        L_next;
	add.u64         %rd70, %rd63, %rd66;
	ld.global.u8    %r21, [%rd70];
	add.u64         %rd70, %rd64, %rd66;
	st.global.u8    [%rd70], %r21;
	add.u64         %rd66, %rd66, %rd69;
	bra             L_bytes;
L_next:
	add.u32         %r34, %r34, 1;
	bra             L_target;`)
}

// goAllToAllLayout is alltoall_layout.go.
func goAllToAllLayout() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `// %s

package cuda

// The all-to-all kernel's parameter block (ptx/alltoall.ptx), past the
// shared header, and its count slots.
const (
	// Input argIn, the equal form's block bytes argSlice, the form
	// argMask, outputs as mapped here argDst, then: element size, input
	// and output capacities (elements), the device form's counts and
	// splitsOut, the host form's counts.
	a2aElem, a2aInCap, a2aOutCap, a2aDev, a2aDevOut = %d, %d, %d, %d, %d
	a2aSend, a2aRecv, a2aArgBytes                 = %d, %d, %d
	// Forms (argMask).
	a2aFormEqual, a2aFormHost, a2aFormDevice = %d, %d, %d
	// Two count slots at this region offset, a2aSlotBytes each.
	a2aCounts, a2aSlotBytes = %d, %d

	// A split-count report (kindSplits): faultMine says what; the two
	// values are u64 words at faultX and faultY.
	splitsDiffer, splitsIn, splitsOut, splitsNegative = %d, %d, %d, %d
)
`, generatedLine, pA2AElem, pA2AInCap, pA2AOutCap, pA2ADev, pA2ADevOut, pA2ASend, pA2ARecv, pA2ASize,
		formEqual, formHost, formDevice, rCounts, cSlot, splitsDiffer, splitsIn, splitsOut, splitsNegative)
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("alltoall_layout.go does not format: %w", err)
	}
	return src, nil
}
