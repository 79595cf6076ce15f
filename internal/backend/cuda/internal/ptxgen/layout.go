package main

import (
	"bytes"
	"fmt"
	"go/format"
)

// The kernels' fixed shape. The launch code (kernel.go, allreduce.go) gets
// these through the generated kernel_layout.go, never by copying numbers.
const (
	maxRanks = 8   // peers in the parameter block (registers per rank are unrolled)
	maxCTAs  = 64  // CTAs with an epoch counter and flags in the region
	threads  = 512 // threads per CTA: the all-reduce's shared slots assume it
	vecBytes = 16  // the kernels' fast path moves 16-byte vectors (v4.u32)
	arSlots  = 4   // 16-byte results one all-reduce thread keeps in shared memory
)

// Parameter block P, shared header then per-kernel arrays. Offsets in bytes.
const (
	pA        = 0                      // u64: all-gather input / all-reduce output
	pBytes    = 8                      // u64: all-gather slice / all-reduce bytes (any count of whole elements)
	pRegion   = 16                     // u64: this rank's signal region
	pMe       = 24                     // u32
	pN        = 28                     // u32
	pMode     = 32                     // u32: all-gather target mask / reduction dtype code
	pFlags    = 36                     // u32: flags (reduction: flagDirect, flagAvg; both: flagFirst, flagSecond)
	pPtrs     = 40                     // [maxRanks]u64: all-gather targets / all-reduce sources
	pPeerRegs = pPtrs + 8*maxRanks     // [maxRanks]u64: rank k's region as mapped here
	pTimeout  = pPeerRegs + 8*maxRanks // u64: watchdog, ns of %globaltimer
	pHash     = pTimeout + 8           // u32: digest of the call's arguments (every rank's must match)
	pUnit     = pHash + 4              // u32: bytes per access (see below)
	pFault    = pHash + 8              // u64: mapped host words where a mismatch is reported (fault.go)
	pStop     = pFault + 8             // u64: the call gate's failed word as mapped here, 0 without a gate (pollStop)
	pSize     = pStop + 8
)

// P.unit, chosen by the host from the addresses this rank's launch touches
// (kernel.go: agUnit, reduceUnit); it may differ between ranks, the grid
// may not (the host sizes it from what every rank shares):
//
//   - all-gather: 16, 8, 4, 2 or 1, the widest access every address (input
//     and targets) is aligned to; slice/unit accesses of that width (16:
//     the four-vectors-in-flight loop), then the last slice%unit bytes one
//     by one;
//   - reductions: 16 when every address is 16-byte aligned (vector mode:
//     bytes/16 vectors, then the last bytes%16 element by element), else
//     the element size (element mode: every element alone, slower).

// The call gate's guard (handshake.ptx, symmem_gate_guard) uses P's
// first words: where the approval and the failed word are (the gate's
// shared page, registered host memory), the call's number; pTimeout is its
// watchdog.
const (
	pGateApproved = pA     // u64
	pGateFailed   = pBytes // u64
	pGateCall     = pMode  // u32: the call's number (low 32 bits; compared cyclically)
)

// Reduction flags (pFlags).
const (
	flagDirect = 1 // all-reduce kernel: store results at once (the output aliases no input a peer reads)
	flagAvg    = 2 // divide the sum by n (16-bit types: after rounding the sum, as reduce.Finish does)
	// A call of two launches (two-shot: the all-reduce kernel, then the
	// all-gather kernel) advances the shared epoch once per launch; when the
	// first finds a mismatch (a peer may have run a one-launch path) it sets
	// the region's skip word, and the second ends at once without counting
	// itself, so every rank's epoch stays in step and the group usable.
	flagFirst  = 4 // the first launch of a two-launch call
	flagSecond = 8 // the second launch of a two-launch call
)

// The low-contention reduce-scatter's own uses of P (the header is shared;
// pRegion is the local word block: consumed u32, arrived[maxRanks-1] u32,
// finished[2] u32).
const (
	pOwn     = pPtrs      // u64: this rank's chunk of its input (in + me*bytes)
	pStaging = pPtrs + 8  // u64: staging, two slots of (n-1) sub-chunks
	pChunk   = pPtrs + 16 // u64: sub-chunk bytes (a multiple of 16; the last sub-chunk may be shorter)

	wFinished = 4 * maxRanks // offset of finished[2] u32 in the word block
	wBytes    = wFinished + 8
)

// The low-latency kernel's block: the shared header and table offsets
// (pA its input, pBytes the bytes of one row's message, pMode the dtype,
// pPtrs rank k's LL area, pPeerRegs rank k's signal region), then three
// words of its own past pSize.
const (
	pLLOut    = pSize      // u64: the output
	pLLStride = pSize + 8  // u64: bytes between the input chunks sent to successive ranks (0: the whole input to each)
	pLLRow    = pSize + 16 // u64: bytes of one source row in a half of the LL area
	pLLSize   = pSize + 24

	flagGather = 16 // copy each row to out + q*bytes (all-gather) instead of summing the rows
	flagOwn    = 32 // with flagGather: copy this rank's input to out + me*bytes too (out of place)
	flagBytes  = 64 // the input or the output is off 16 bytes: move their vectors byte by byte

	llLine    = 16  // bytes of one line: {data u32, flag u32} twice; 8 bytes of data
	llThreads = 256 // threads per CTA of the low-latency kernel (its registers hold every rank's lines)
)

// Signal region of one kernel: the launch word (the epoch of this rank's
// last finished launch; every CTA of a launch uses it + 1), the finished
// count (CTAs of the running launch that ended), header[maxRanks] {epoch,
// digest} u32 pairs (what rank k's CTA 0 announced for its launch),
// the skip word (flagFirst), the reported word, then ready[maxCTAs][maxRanks]
// u32 and done[maxCTAs][maxRanks] u32.
const (
	rLaunch   = 0
	rFinished = 4
	rHeader   = 8
	rSkip     = rHeader + 8*maxRanks // u32: the first launch of a call found a mismatch (flagFirst)
	rReported = rSkip + 4            // u32: the last launch whose mismatch was reported (one CTA writes each report)
	rReady    = 4 * maxCTAs
	rDone     = rReady + 4*maxCTAs*maxRanks
	rSize     = rDone + 4*maxCTAs*maxRanks
)

// The mapped host words of a report (pFault), u32: set, the peer (group
// rank), this rank's digest, the peer's, the epoch, the kind, and two u64
// values (low word first) that only a split-count report uses. One CTA
// per launch writes a report: set to 0, the fields, then set to the epoch
// with the top bit on (never 0), so the host can tell a report it read
// whole from one being overwritten (fault.go).
const (
	fSet, fPeer, fMine, fTheirs, fEpoch, fKind = 0, 1, 2, 3, 4, 5
	fX, fY                                     = 6, 8
	fWords                                     = 10
)

// Report kinds (fKind): the peer's digest differs and the kernel skipped
// its work; the handshake found a difference and trapped (the context is
// lost); a wait for the peer ended because the call gate failed (pollStop;
// the peer's digest is 0: never seen); the all-to-all's split counts are
// wrong (alltoall.go: fMine says what, fPeer and fTheirs name the ranks, fX
// and fY hold the counts). kindAbandoned is also the value a CTA's sfault
// has for it (faultReport masks with it).
const (
	kindMismatch, kindStopped, kindAbandoned, kindSplits = 0, 1, 2, 3
)

// goLayout is kernel_layout.go.
func goLayout() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `// %s

package cuda

// The kernels' parameter blocks and signal regions, as ptx/*.ptx use them.
const (
	kernMaxRanks = %d // peers in a parameter block
	kernMaxCTAs  = %d // CTAs with counters and flags in a signal region
	kernThreads  = %d // threads per CTA (the all-reduce's shared memory assumes it)
	hsThreads    = %d // threads of the handshake's one CTA (its .maxntid)
	kernAlign    = %d // bytes per vector: the fast path's unit (argUnit)
	kernArgBytes = %d // parameter block size

	// Header, the same in every kernel.
	argRegion, argMe, argN    = %d, %d, %d
	argPeerRegion, argTimeout = %d, %d
	argHash, argFault         = %d, %d // the call's digest; where a mismatch is reported
	argStop                   = %d     // the call gate's failed word (0: none): waits end when it is set
	// Bytes per access, per rank: all-gather 1..16 (then a tail of single
	// bytes), reductions 16 (vectors, then a tail of elements) or the
	// element size (every element alone).
	argUnit = %d

	// All-gather: input, slice bytes, target mask, targets[kernMaxRanks].
	argIn, argSlice, argMask, argDst = %d, %d, %d, %d

	// All-reduce: output, bytes, dtype code, flags, sources[kernMaxRanks].
	arOut, arBytes, arDType, arFlags, arSrc = %d, %d, %d, %d, %d
	arSlots                                 = %d // 16-byte results per thread held in shared memory
	arFlagDirect, arFlagAvg                 = %d, %d
	// Both kernels (flags at arFlags): the first and second launch of a
	// two-launch call (two-shot).
	kernFlagFirst, kernFlagSecond = %d, %d

	// Low-contention reduce-scatter: output, bytes, word block (in argRegion),
	// dtype and flags as the all-reduce, own chunk, staging, sub-chunk bytes.
	lcOwn, lcStaging, lcChunk = %d, %d, %d
	// Its word block: consumed, arrived[kernMaxRanks-1], finished[2], u32.
	lcFinished, lcWordBytes = %d, %d

	// Low-latency kernel: output, input stride, row bytes (past the
	// header's block: llArgBytes), its flags, bytes per line.
	llOut, llStride, llRow, llArgBytes = %d, %d, %d, %d
	llFlagGather, llFlagOwn, llLineBytes = %d, %d, %d
	llFlagBytes                          = %d // buffers off 16 bytes: byte loads and stores
	llThreads                            = %d // threads per CTA

	// Signal region: launch, finished, header[kernMaxRanks]{epoch, hash},
	// skip, reported, then ready and done[kernMaxCTAs][kernMaxRanks], u32.
	regionLaunch, regionFinished, regionHeader, regionSkip, regionReported = %d, %d, %d, %d, %d
	regionReady, regionDone, regionBytes       = %d, %d, %d

	// Report (mapped host words): set, peer, mine, theirs, epoch, kind,
	// then two u64 values (low word first; split-count reports).
	faultSet, faultPeer, faultMine, faultTheirs, faultEpoch, faultKind, faultWords = %d, %d, %d, %d, %d, %d, %d
	faultX, faultY = %d, %d
	// Report kinds: a difference (the kernel did nothing), the handshake
	// trapped (the context is lost), a wait ended because the gate failed,
	// the all-to-all's split counts are wrong (the kernel did nothing).
	kindMismatch, kindStopped, kindAbandoned, kindSplits = %d, %d, %d, %d

	// The call gate's guard: the approval word, the failed word, the call.
	guardApproved, guardFailed, guardCall = %d, %d, %d
)
`, generatedLine, maxRanks, maxCTAs, threads, handshakeThreads, vecBytes, pSize,
		pRegion, pMe, pN, pPeerRegs, pTimeout, pHash, pFault, pStop, pUnit,
		pA, pBytes, pMode, pPtrs,
		pA, pBytes, pMode, pFlags, pPtrs, arSlots, flagDirect, flagAvg, flagFirst, flagSecond,
		pOwn, pStaging, pChunk, wFinished, wBytes,
		pLLOut, pLLStride, pLLRow, pLLSize, flagGather, flagOwn, llLine, flagBytes, llThreads,
		rLaunch, rFinished, rHeader, rSkip, rReported, rReady, rDone, rSize,
		fSet, fPeer, fMine, fTheirs, fEpoch, fKind, fWords, fX, fY, kindMismatch, kindStopped, kindAbandoned, kindSplits,
		pGateApproved, pGateFailed, pGateCall)
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("kernel_layout.go does not format: %w", err)
	}
	return src, nil
}
