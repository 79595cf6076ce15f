package main

import "fmt"

func init() { register("ptx/handshake.ptx", handshake) }

// handshakeThreads is the handshake's CTA: one thread per peer (warp-sized,
// at least maxRanks).
const handshakeThreads = 32

// handshake is ptx/handshake.ptx: the in-band argument check beside the
// copy-engine paths and NCCL calls, whose stream memory operations and
// kernels cannot compare values or branch.
func handshake() string {
	var p ptx
	p.header(fmt.Sprintf(`handshake.ptx: the argument check of symmem's copy-engine paths (ce, lc) and of NCCL
calls, launched on a stream of its own beside the call, which joins it before its
last step (PTX from internal/backend/cuda/internal/ptxgen).

One CTA of %[6]d threads; thread k talks to peer k with the all-gather
kernel's ready protocol in the region all signalling kernels share
(allgather.ptx, the same fragments; a launch of another kernel on a peer
carries another digest, so a rank that took another path is found
too): it announces the launch with the call's digest (P.hash) in peer
k's header, waits for peer k's announcement and compares the two. Equal on
every rank: the kernel ends and the call's last step may run. A difference:
thread 0 writes the report into P.fault (fault.go), every thread tells its
peer and waits (at most a second) for the peer to tell it, then the CTA
executes `+"`trap`"+`: stream memory operations and NCCL's kernels cannot skip
work or stop waiting, so the check stops the context instead, on every
rank, before anything ordered after the call runs; the host reports the
mismatch with the launch error. The watchdog (P.timeout) bounds the wait
like in the other kernels.

Parameter block P (%[1]d bytes; the shared header, kernel_layout.go):
  %[2]d region u64 (local) | %[3]d me u32 | %[4]d n u32
  %[5]d peer regions[%[7]d] u64 | %[8]d timeout u64 | %[9]d hash u32 | %[10]d fault u64`,
		pSize, pRegion, pMe, pN, pPeerRegs, handshakeThreads, maxRanks, pTimeout, pHash, pFault))
	p.w("")
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.faultShared()
	p.w("")
	p.entryTuned("symmem_handshake", fmt.Sprintf(".maxntid %d, 1, 1", handshakeThreads), `	.reg .pred  %p<8>;
	.reg .b32   %r<20>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.setup("Thread 0: peer regions to shared memory (indexable), the epoch.", false, table{"sreg", pPeerRegs})
	p.signalReady("Thread k < n (k != me) talks to peer k: announce, wait for its, compare.", "sreg")
	p.finish()
	p.faultTrap()
	p.w("}")
	p.w("")
	p.w("")
	p.w(`// symmem_gate_guard: the call gate's check of one copy-engine or NCCL call
// that was not approved when its rank published it (gate.go), one thread,
// first on the call's stream. It polls the approval word in the gate's
// shared page (registered host memory) until it reaches P.call (cyclic),
// and ends: the call's work may run. If the failed word is set first and,
// read again, the approval still has not reached the call (the ranks'
// calls differ at or before it), or the watchdog (P.timeout) passes, it
// traps before any data of the call moved: stream memory operations and
// NCCL cannot be stopped otherwise, and the approval would never come, so
// the trap ends the context.`)
	p.f(".visible .entry symmem_gate_guard(\n\t.param .align 8 .b8 P[%d]\n)", pSize)
	p.w(".maxntid 1, 1, 1")
	p.f(`{
	.reg .pred  %%p<4>;
	.reg .b32   %%r<4>;
	.reg .b64   %%rd<8>;
	ld.param.u64    %%rd1, [P+%d];   // approval word
	ld.param.u64    %%rd2, [P+%d];   // failed word
	ld.param.u32    %%r1, [P+%d];    // the call
	ld.param.u64    %%rd3, [P+%d];   // watchdog (ns)
	mov.u64         %%rd4, %%globaltimer;
GUARD_POLL:
	ld.relaxed.sys.global.u32 %%r2, [%%rd1];
	sub.s32         %%r3, %%r2, %%r1;
	setp.ge.s32     %%p1, %%r3, 0;
	@%%p1 bra       GUARD_DONE;
	ld.relaxed.sys.global.u64 %%rd5, [%%rd2];
	setp.ne.u64     %%p2, %%rd5, 0;
	@%%p2 bra       GUARD_FAILED;
	mov.u64         %%rd6, %%globaltimer;
	sub.u64         %%rd6, %%rd6, %%rd4;
	setp.gt.u64     %%p3, %%rd6, %%rd3;
	@%%p3 bra       GUARD_STOP;
	nanosleep.u32   1000;
	bra.uni         GUARD_POLL;
GUARD_FAILED:
	ld.relaxed.sys.global.u32 %%r2, [%%rd1];   // approvals end at the call before the first difference
	sub.s32         %%r3, %%r2, %%r1;
	setp.ge.s32     %%p1, %%r3, 0;
	@%%p1 bra       GUARD_DONE;
GUARD_STOP:
	trap;
GUARD_DONE:
	ret;
}`, pGateApproved, pGateFailed, pGateCall, pTimeout)
	return p.b.String()
}
