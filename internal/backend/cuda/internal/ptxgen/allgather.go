package main

import "fmt"

func init() { register("ptx/allgather.ptx", allGather) }

// agUnroll is how many vectors one trip of the all-gather's main loop has in
// flight (quads 0..3; the loop's 3S and 4S below assume 4).
const agUnroll = 4

// allGather is ptx/allgather.ptx. Target k's address is %rd(30+k), its
// predicate %qk (bit k of the mask).
func allGather() string {
	p := ptx{abandon: true}
	p.header(fmt.Sprintf(`allgather.ptx: symmem's SM all-gather for small messages (PTX from
internal/backend/cuda/internal/ptxgen, JIT-compiled by the driver at group creation;
no CUDA toolkit needed).

Push: every CTA loads units of this rank's input once and stores them into
each target of the mask (the peers' outputs through their peer mappings,
and this rank's own output slot when out-of-place). A unit is P.unit bytes:
16 (v4.u32 vectors, four in flight per thread) when the input and every
target are 16-byte aligned, else the widest of 8, 4, 2, 1 they all allow;
the last slice%%unit bytes (fewer than 16) then go one by one. Any slice of
any alignment is served; narrow units are slower. The grid depends only on
the slice (equal on every rank); the unit may differ between ranks.

Signals are per CTA and per pair of ranks, so no grid-wide barrier is
needed: CTA b of rank r waits only for CTA b of each peer; thread k of the
CTA signals and waits for peer k, so all peers are served in parallel.
Signal values are launch epochs kept on the device (the launch word of
this rank's region, advanced by the last CTA of each launch), so a captured
CUDA graph replays correctly: the kernel never depends on a value chosen by
the host. CTA 0 announces each launch to every peer with the call's
digest (P.hash); a CTA compares it with its own before it moves data,
and on a difference (other arguments: also a different grid) every CTA
ends and reports through P.fault (fault.go) instead of running or waiting
for CTAs the peer never launched.

Region layout (bytes from the region base; kernel_layout.go):
  0     launch u32, 4 finished u32  this rank's last finished launch; CTAs done with the running one
  8     header[%[2]d] {epoch, hash} u32  what rank `+"`from`"+`'s CTA 0 announced
  %[3]d   ready[%[1]d][%[2]d] u32 ready[b][from]: CTA b of rank `+"`from`"+` may write here
  %[4]d  done[%[1]d][%[2]d]  u32 done[b][from]:  CTA b of rank `+"`from`"+` finished writing

Watchdog: a signalling thread that waits longer than P.timeout (the
backend's Options.Watchdog) for a peer executes `+"`trap`"+`. The context then
fails every later call with a launch error, instead of spinning forever on
a rank that died: loud and bounded, like every other wait of symmem.
Sooner than that, a wait that has spun 100 us reads P.stop (the call
gate's failed word in host memory, set when a rank left or the ranks'
calls diverged) on every trip; once it is set the CTA stops waiting and
ends with a report of kind 2 (abandoned) in P.fault: the context survives
and the host explains the gate's failure (fault.go, gate.go).

Parameter block P (%[5]d bytes; kernel_layout.go):
  %[6]d in u64 | %[7]d slice bytes u64 (any) | %[8]d region u64 (local)
  %[9]d me u32 | %[10]d n u32 | %[11]d mask u32 (bit k: write target k) | %[12]d flags u32 (8: second launch)
  %[13]d dst[%[2]d] u64 (target k's address for this rank's slice)
  %[14]d peer regions[%[2]d] u64 (rank k's region as mapped here)
  %[15]d timeout u64 (nanoseconds of %%globaltimer) | %[16]d hash u32 | %[18]d unit u32 (16, 8, 4, 2, 1)
  %[17]d fault u64 (mapped host words) | %[19]d stop u64 (the gate's failed word; 0: none)`,
		maxCTAs, maxRanks, rReady, rDone, pSize, pA, pBytes, pRegion, pMe, pN, pMode, pMode+4, pPtrs, pPeerRegs, pTimeout, pHash, pFault, pUnit, pStop))
	p.w(`
// Peer regions, indexable by rank, and the epoch (set by thread 0 of each CTA).`)
	p.f(".shared .align 8 .b64 sreg[%d];", maxRanks)
	p.w(".shared .align 4 .b32 sepoch;")
	p.w(".shared .align 4 .b32 sskip;")
	p.faultShared()
	p.w("")
	p.entry("symmem_allgather_push", `	.reg .pred  %p<8>;
	.reg .pred  %q<8>;
	.reg .b32   %r<40>;
	.reg .b64   %rd<48>;
`)
	p.loadParams()
	p.setup("Thread 0: peer regions to shared memory (indexable), the epoch.", true, table{"sreg", pPeerRegs})
	p.skipIfFirstFailed()
	p.signalReady("Thread k < n (k != me) talks to peer k: signal ready, wait for its.", "sreg")

	p.w("\n\t// Targets and their predicates.")
	for k := 0; k < maxRanks; k++ {
		p.f("\tld.param.u64    %%rd%d, [P+%d];", 30+k, pPtrs+8*k)
	}
	for k := 0; k < maxRanks; k++ {
		p.f("\tand.b32         %%r20, %%r7, %d;", 1<<k)
		p.f("\tsetp.ne.u32     %%q%d, %%r20, 0;", k)
	}
	p.f(`
	// Unit W (P.unit): 16-byte vectors, or W-byte accesses where an address
	// is not 16-byte aligned; then the last slice%%W bytes one by one.
	ld.param.u32    %%r16, [P+%d];
	setp.ne.u32     %%p5, %%r16, 16;
	@%%p5 bra        L_units;`, pUnit)
	p.copyLoop(16)
	p.w(`	bra             L_tail;
L_units:
	setp.eq.u32     %p5, %r16, 8;
	@%p5 bra        L_w8;
	setp.eq.u32     %p5, %r16, 4;
	@%p5 bra        L_w4;
	setp.eq.u32     %p5, %r16, 2;
	@%p5 bra        L_w2;
	bra             L_w1;`)
	for _, w := range []int{8, 4, 2, 1} {
		p.f("L_w%d:", w)
		if w == 1 {
			p.w("\tmov.u32         %r16, 1;                      // any other unit: bytes (the tail's mask too)")
		}
		p.copyLoop(w)
		p.w("\tbra             L_tail;")
	}
	p.w(`L_tail:
	// The last slice%W bytes (fewer than 16, fewer than the grid's threads):
	// thread i of the grid copies byte (slice & -W) + i.
	mul.wide.u32    %rd24, %r2, %r3;
	cvt.u64.u32     %rd25, %r1;
	add.u64         %rd24, %rd24, %rd25;
	cvt.u64.u32     %rd9, %r16;
	neg.s64         %rd9, %rd9;
	and.b64         %rd9, %rd2, %rd9;              // slice & -W: the units' bytes
	add.u64         %rd24, %rd24, %rd9;
	setp.ge.u64     %p5, %rd24, %rd2;
	@%p5 bra        L_copy_done;
	add.u64         %rd28, %rd1, %rd24;
	ld.global.u8    %r37, [%rd28];`)
	for k := 0; k < maxRanks; k++ {
		p.f("\tadd.u64         %%rd40, %%rd%d, %%rd24;", 30+k)
		p.f("\t@%%q%d st.global.u8 [%%rd40], %%r37;", k)
	}
	p.w(`L_copy_done:
	// Every thread's stores precede the signalling threads' release (the
	// barrier, then a system-scope fence: release is cumulative).`)
	p.signalDone(true, "L_end")
	p.finish()
	p.faultExit()
	p.skipExit()
	p.w("}")
	return p.b.String()
}

// copyLoop is the all-gather's copy in w-byte units (16: v4.u32 vectors):
// unit i = b*T + tid, stride S = nb*T, while i < slice/w; four units per
// trip (i, i+S, i+2S, i+3S: four loads in flight), then one per trip for
// the rest. It leaves through its end (the caller places what follows).
func (p *ptx) copyLoop(w int) {
	shift := map[int]int{1: 0, 2: 1, 4: 2, 8: 3, 16: 4}[w]
	sfx, what := "", "Vectors"
	if w != 16 {
		sfx, what = fmt.Sprintf("_w%d", w), fmt.Sprintf("%d-byte units", w)
	}
	// reg(j) is the j-th unit in flight; ld/st are the access's spelling.
	reg := quad
	op := "v4.u32"
	switch w {
	case 8:
		reg, op = func(j int) string { return fmt.Sprintf("%%rd%d", 4+j) }, "u64"
	case 4, 2, 1:
		reg, op = func(j int) string { return fmt.Sprintf("%%r%d", 21+4*j) }, fmt.Sprintf("u%d", 8*w)
	}
	p.f(`	// %s: i = b*T + tid, stride S = nb*T, while i < slice/%d. Four
	// per trip (i, i+S, i+2S, i+3S: four loads in flight), then
	// one per trip for the rest.
	shr.u64         %%rd29, %%rd2, %d;
	mul.wide.u32    %%rd24, %%r2, %%r3;
	cvt.u64.u32     %%rd25, %%r1;
	add.u64         %%rd24, %%rd24, %%rd25;
	mul.wide.u32    %%rd26, %%r4, %%r3;
	shl.b64         %%rd43, %%rd26, %d;              // S in bytes
	mul.lo.u64      %%rd41, %%rd26, 3;              // 3S
	shl.b64         %%rd45, %%rd26, 2;              // 4S
L_copy4%[5]s:
	add.u64         %%rd42, %%rd24, %%rd41;
	setp.ge.u64     %%p5, %%rd42, %%rd29;            // i+3S past the end
	@%%p5 bra        L_copy%[5]s;
	shl.b64         %%rd27, %%rd24, %[4]d;
	add.u64         %%rd28, %%rd1, %%rd27;`, what, w, shift, shift, sfx)
	for j := 0; j < agUnroll; j++ {
		if j > 0 {
			p.w("\tadd.u64         %rd28, %rd28, %rd43;")
		}
		p.f("\tld.global.%s %s, [%%rd28];", op, reg(j))
	}
	for k := 0; k < maxRanks; k++ {
		p.f("\tadd.u64         %%rd40, %%rd%d, %%rd27;", 30+k)
		for j := 0; j < agUnroll; j++ {
			if j > 0 {
				p.w("\tadd.u64         %rd40, %rd40, %rd43;")
			}
			p.f("\t@%%q%d st.global.%s [%%rd40], %s;", k, op, reg(j))
		}
	}
	p.f(`	add.u64         %%rd24, %%rd24, %%rd45;
	bra             L_copy4%[1]s;
L_copy%[1]s:
	setp.ge.u64     %%p5, %%rd24, %%rd29;
	@%%p5 bra        L_copy_end%[1]s;
	shl.b64         %%rd27, %%rd24, %[2]d;
	add.u64         %%rd28, %%rd1, %%rd27;`, sfx, shift)
	p.f("\tld.global.%s %s, [%%rd28];", op, reg(0))
	for k := 0; k < maxRanks; k++ {
		p.f("\tadd.u64         %%rd40, %%rd%d, %%rd27;", 30+k)
		p.f("\t@%%q%d st.global.%s [%%rd40], %s;", k, op, reg(0))
	}
	p.f(`	add.u64         %%rd24, %%rd24, %%rd26;
	bra             L_copy%[1]s;
L_copy_end%[1]s:`, sfx)
}
