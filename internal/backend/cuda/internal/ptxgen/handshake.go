package main

import "fmt"

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
carries another fingerprint, so a rank that took another path is found
too): it announces the launch with the call's fingerprint (P.hash) in peer
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
	p.w(`// symmem_stop ends this process's context on purpose: the call gate
// (gate.go) found that the ranks' calls differ while this rank's streams
// wait for an approval that will never come; the trap ends those waits.
// It takes the kernels' parameter block and reads none of it.`)
	p.entryTuned("symmem_stop", ".maxntid 1, 1, 1", "")
	p.w("\ttrap;")
	p.w("}")
	return p.b.String()
}
