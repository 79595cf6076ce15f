// Package plan is the CPU backend's schedule language: for one rank of a
// group, the list of steps that rank executes for one collective call —
// which bytes it copies or reduces from whose symmetric buffer, and which
// signals it sends and waits for. internal/backend/shm interprets plans; this package
// only builds, checks and prints them, and plantest simulates a group of
// them. It is pure Go.
//
// Scope: the GPU backend does not run plans. Its copy engines signal with
// stream memory operations that set, wait for and reset pad words (a
// captured graph must replay without host-chosen values), and its kernels
// with per-CTA epochs kept in device memory (internal/backend/cuda/ptx); those two
// protocols are checked by internal/backend/cuda's own model test
// (TestSignalProtocolModel) and its GPU tests, not by plantest. Lowering
// them to plans would need set/reset words and per-CTA signals in the step
// vocabulary.
//
// # Buffers and references
//
// A rank sees three buffers, all addressed by byte offsets:
//
//	In       the call's input, symmetric: every rank's In has the same size
//	Out      the call's output, symmetric
//	Scratch  private to the rank (never read by peers), ScratchBytes long
//
// A Ref{Buf, Rank, Off} names byte Off of rank Rank's copy of Buf. Plans are
// pull-based: a step only ever writes its own rank's buffers (Dst.Rank ==
// Plan.Rank) and reads its own or peers' In/Out. An in-place plan
// (Plan.InPlace) uses Out only; Out is then the whole tensor: AllGather's
// gathered output (its rank-r slice was the input), ReduceScatter's full
// input (its rank-r slice receives the result), AllReduce's tensor.
//
// Sizes per rank (Plan.InBytes, Plan.OutBytes) with count elements of s bytes
// and n ranks:
//
//	AllGather      In count*s        Out n*count*s   (count per rank)
//	ReduceScatter  In n*count*s      Out count*s     (count per rank)
//	AllReduce      In count*s        Out count*s     (count = whole tensor)
//	Broadcast      In 0              Out count*s     (root's Out is the source)
//
// # Steps and how to execute them
//
//	Copy    Dst[0:Bytes] = Srcs[0][0:Bytes]
//	Reduce  Dst = Srcs[0] op Srcs[1] op ... (reduce.ReduceN with Plan.DType
//	        and Plan.Op), then for Avg divide by len(Srcs) (reduce.Finish).
//	        Sources are always in ascending rank order, so every rank and
//	        every chunking computes bit-identical results.
//	Signal  tell rank Peer that this rank reached Phase
//	Wait    block until rank Peer has signalled Phase (or a later phase)
//
// Steps run in order, with one relaxation: the data steps (Copy, Reduce)
// between two consecutive sync steps (Signal, Wait) form a stage; they write
// disjoint bytes and read nothing another step of the stage writes, so a
// backend may run them in any order or in parallel (Options.Chunks splits
// each data step into element-aligned pieces for that purpose). A Signal must
// not be sent before every earlier data step has completed and its writes
// are visible to peers (release); a Wait orders every later step after it
// (acquire).
//
// # Signals and epochs
//
// Each rank owns a signal pad with one 32-bit word per sending peer;
// Signal{Peer: p} writes to word [me] of p's pad and only the sender writes
// that word, so a plain release store suffices and no word is ever reset.
// The group keeps an epoch base E, equal on all ranks because every rank
// runs the same sequence of collectives; it starts at 0. In a call, Signal
// with phase k stores Target(E, k) = E+k+1 and Wait with phase k waits until
// Reached(word, E+k+1), i.e. int32(word - (E+k+1)) >= 0 (wrap-aware
// "greater or equal", the semantics of CUDA's CU_STREAM_WAIT_VALUE_GEQ). After the call the backend adds
// Plan.Phases to E. A peer may run ahead into the next call and store a
// larger value before we saw the smaller one; the >= test accepts that,
// because the later signal implies the earlier one. Peers never drift more
// than a few phases apart, far from the 2^31 wrap limit. Nothing is ever
// reset, so there is no reset race.
//
// A backend's executor is then, per call (E shared by the group's calls):
//
//	for _, st := range p.Steps {
//		switch st.Op {
//		case plan.Copy:   copy(bytes(st.Dst), bytes(st.Srcs[0]))
//		case plan.Reduce: reduce.ReduceN(bytes(st.Dst), bytes(st.Srcs...), p.DType, p.Op)
//		                  reduce.Finish(bytes(st.Dst), p.DType, p.Op, len(st.Srcs))
//		case plan.Signal: store-release(pad(st.Peer)[p.Rank], plan.Target(E, st.Phase)); wake
//		case plan.Wait:   until plan.Reached(load-acquire(pad(p.Rank)[st.Peer]), plan.Target(E, st.Phase)) { sleep, with a timeout }
//		}
//	}
//	E += uint32(p.Phases)
//
// where bytes(ref) is rank ref.Rank's mapping of ref.Buf plus ref.Off. Plans
// depend only on the Spec, so a backend can build them once and cache them.
//
// The barriers in generated plans: phase 0 "my inputs are ready" (sent on
// entry); for two-shot AllReduce phase 1 "my reduced slice is in my Out";
// the last phase "I have finished reading your buffers", waited for before
// returning so the caller may reuse In and Out at once.
//
// # Checking
//
// Validate checks one plan on its own (bounds, alignment, references,
// phases, a Wait on a peer before reading it, a Signal to it after, and
// stage independence). ValidateGroup checks that the n plans of a group
// match (every Wait has its Signal and vice versa). plantest.Simulate (a
// package for tests) executes the n plans against in-memory buffers,
// honouring waits, with a happens-before checker that reports any read of a
// peer's buffer not ordered after the peer's writes (or the caller's) and
// before the peer returns, and reports deadlock (a Wait whose Signal never
// comes) naming the stuck ranks.
package plan
