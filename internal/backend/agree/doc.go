// Package agree is symmem's agreement subsystem: the records ranks compare
// before they act (Record, Agreer, Disagreement: the pool's scope ends
// compare them too, so this package sits below the pool and imports none of
// it), their encodings and digest, the naming of a difference,
// and how a backend declares the way its groups agree: Calls, in
// backend.Capabilities, for every collective's record, and pool.Group's
// Agreer, per group, for records outside a call (scope ends, empty calls).
// Nothing is discovered by a type assertion. The transports that carry the
// records stay with what they ride on (listed below); they carry this
// package's records and digest and name differences with Explain.
//
// # Words
//
// One word per concept, in identifiers, comments, errors and
// docs/verification.md:
//
//   - record (Record): the fixed-size description of what a rank is
//     about to do, which every rank of a group must do alike. A call
//     record (CallRecord) is a collective's arguments: kind, dtype, op,
//     root, count, in-place, staged, and the buffers' pool locations
//     (backend.Request.Record). A scope-end record is the pool's
//     allocation state and the segments about to be registered (the pool
//     makes it). Word 0's top byte says which.
//   - path: the algorithm that runs a call (coll.Algo). A Call is a record
//     and its path, compared where ranks could take different paths.
//   - digest (Digest): a call's fixed-size (32-bit) summary, which travels
//     where a record does not fit: in the GPU kernels' signals. (The GPU
//     backend called it "fingerprint"; checked mode's string and the
//     pool's store message were "fingerprints" too: they are records.)
//     A hash is any other mixing: the pool's allocation-state hash, its
//     log hash.
//   - agreement: the ranks comparing their records for one call or scope
//     end, in the same order on every rank (an Agreer does one in-band).
//     Its outcome is nil or a disagreement (Disagreement): the lowest
//     group rank whose record, or position, differs from group rank 0's,
//     with both records, the same on every rank.
//   - position: a record's place in the group's sequence of agreements
//     (Disagreement.Seq); ranks at different positions disagree whatever
//     their records.
//   - difference: what a disagreement is about, named for the user: Diff
//     (the first differing argument and both values), Explain and
//     Disagreement.Explain (the sentence, one for every place that names one).
//   - mismatch: the error a disagreement becomes (errs.Mismatch, the user's
//     ErrMismatch); the GPU's findings (a kernel's report, the gate's
//     members.GateMismatch) are such errors from the start.
//   - transport: where records or digests travel (below).
//   - gate: the call gate, a transport that numbers a group's calls and
//     approves each once every rank published it alike.
//   - checked mode (Options.Checked, backend.Request.Checked): the checks
//     that cost time on every call; "check" alone is no concept here.
//
// # Transports
//
// Where each is used, and why:
//
//   - Signal pads (CPU backend, internal/backend/shm/agree.go): every
//     collective's record rides on the phase-0 signals the collective
//     exchanges anyway (~45 ns per call with 2 ranks); broadcast, empty
//     calls and scope ends run one all-to-all phase for it. Every rank
//     reads every record before it reads any peer's data, so a difference
//     stops the call before data moves, and the group stays usable. The
//     pads' waits notice a peer that exited or left. Calls: CallsInBand;
//     the group is its own Agreer.
//   - Host page (members.HostAgreement; GPU backend, ranks on one host): a
//     shared page per rank with two record slots; compares scope ends and
//     empty calls (~1 us; a pidfd per peer reports an exit at once). It is
//     the GPU group's Agreer where the ranks share a host, and none where
//     they do not (the store then). Calls: CallsByDigest (the two
//     transports below).
//   - Gate ring (members.CallGate, on the same pages): every GPU collective
//     publishes its call (record and path code, PathCode) and goes on
//     (18-43 ns); whichever rank finds every peer's entry compares them
//     and approves the call. It is the only transport that can stop a GPU
//     stream already queued: a copy-engine or NCCL call not yet approved
//     runs a guard kernel first, which traps on a difference.
//   - Kernel signals (GPU backend, fault.go and the kernels): the digest
//     travels with each CTA's ready signal and is compared before any data
//     moves; a difference is reported through mapped host words, and the
//     two ranks of a report swap their calls through the store (Call.Append)
//     to name it. It costs the host a digest and a ring entry per launch.
//     Checked mode's handshake kernel carries the digest the same way
//     beside copy-engine and NCCL calls (it catches CUDA graphs replayed
//     differently).
//   - Store (rendezvous, through members.Gather): the pool's scope ends
//     where the group has no in-band agreement, and, after an in-band
//     disagreement, the round that names the first differing Alloc/Free;
//     every Trim and group removal; checked mode's exchange of each call's
//     record; the kernels' report swap. A round trip costs ~100 us; it
//     works across hosts, and cannot stop work already queued on a device.
package agree
