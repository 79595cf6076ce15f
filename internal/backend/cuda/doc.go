// Package cuda is symmem's GPU backend: its own paths among the ranks of
// one host, NCCL (and the hier path) for groups across hosts
// (spanning.go). It owns:
//
//   - Provider: the pool's segments as CUDA VMM allocations (cuMemCreate with
//     POSIX-fd export, 2 MiB granularity), mapped for this rank's device;
//   - Group: registration of segments with a group (register.go: the segment's fd goes to
//     every peer over rendezvous.FDExchange, peers import and map it and keep
//     the peer addresses per segment: peerTable, peers.go), signal pads (a VMM segment per group,
//     peer-mapped: 10 MiB on 2 ranks, mostly ll's area, padBytes), Run, and for ranks on one host the in-band
//     comparison of scope ends (members.HostAgreement, Group.Agreer);
//   - the kernels' in-band argument check: digests travel with the
//     ready signals, a mismatch is reported through mapped host words and
//     named by swapping the two calls' records through the store (fault.go:
//     faults, which the group holds);
//   - the call gate for ranks on one host (gate.go: callGate, over
//     members.CallGate): every collective publishes its record and path,
//     copy-engine and NCCL calls not yet approved run a guard kernel first
//     that traps on a difference, so no data of a mismatched call moves;
//   - in checked mode, the handshake kernel beside copy-engine and NCCL calls,
//     which traps on a difference (handshake.go: checkedHandshake;
//     ptx/handshake.ptx);
//   - the copy-engine all-gather: stream memory operations signal readiness
//     and completion through the pads (set, wait, reset: no host-chosen
//     values, so a captured graph replays correctly) and cuMemcpyDtoDAsync
//     moves the data, so no SM runs; the whole sequence of one call is issued
//     in one cgo call (cudadrv.Program), a caller's stream fenced inside it
//     unless it is being captured (track, streams.go);
//   - symmem's kernels (kernel.go, allreduce.go; ptx/ and kernel_layout.go
//     written by internal/ptxgen via go generate): PTX JIT-compiled once
//     per process (no CUDA toolkit; modules.go), one cuLaunchKernel per call, per-CTA
//     signals with a device-side launch epoch (graph replay is correct), waits
//     that end early, with a report, once the call gate failed (a peer left
//     or the calls diverged: gate.go), and a watchdog that traps after
//     Options.Watchdog. The all-gather pushes this rank's
//     slice into the peers' outputs (16-byte vectors where every address
//     allows, else 8, 4, 2 or 1-byte units, then the last bytes one by
//     one); the one-shot all-reduce pulls every rank's input and sums (or
//     averages) in float32 in rank order (16-byte vectors then a tail of
//     elements, or element by element where an address is not 16-byte
//     aligned), and pointed at chunk r of every input it is rank r's
//     reduce-scatter; the two-shot all-reduce (twoshot.go) is that
//     reduce-scatter then the all-gather, in place, on chunks of
//     ceil(count/n) rounded up to whole vectors (the last ones shorter or
//     empty). Every count and every element-aligned buffer is served; the
//     unit and mode are per rank, the grid from what all ranks share;
//   - the low-contention reduce-scatter and all-reduce (lowcontention.go,
//     ptx/reducescatter.ptx): copy engines pull the peers' chunks into
//     staging while a few CTAs sum them as they land (any count, as the
//     kernels above);
//   - the low-latency kernel for small messages (lowlatency.go,
//     ptx/lowlatency.ptx): data and flag in one store, no round trips, any
//     device buffers (off 16 bytes: byte by byte);
//   - the hierarchical path for groups across hosts (hierarchical.go): the
//     schedules of internal/hier run as collectives on two child groups
//     (the host's ranks, the local index's ranks across hosts);
//   - algorithm choice (auto) between plain NCCL, NCCL on windows, copy
//     engines and the kernels: a table from measurements, a fallback order
//     per path and the conditions its steps ask, read by one function
//     (autotable.go: auto);
//   - the backend contract's Device part (device.go): writes that are
//     visible to peers when they return, reads, local copies, ordinary
//     device memory, fences and synchronisation.
//
// The route of a call (Run, run.go): the request becomes a call (call.go:
// the request as it runs, its NCCL window status and verdict, its ticket at
// the gate), built once and passed down by value; pathSet.choose picks the
// algorithm (forced: the path's refuse; auto: autotable.go, the table's path
// for the op and size, then the turns of the paths in its fallback order,
// where the special rules are named conditions: autostep.go). Every
// algorithm is a path, a type behind one interface (path.go): symmem's
// kernelPath (kernel.go; the all-reduce kernel's shared facts in
// allreduce.go), twoShotPath (twoshot.go), lcPath (lowcontention.go), llPath
// (lowlatency.go) and cePath (ce.go), NCCL's ncclPath and ncclWindowPath
// (nccl.go; the windows' verdicts in ncclwindow.go), and hierPath
// (hierarchical.go: its child groups' calls in finish), each holding what
// only it uses and the group's core (core.go: the members, what setup
// decided and made, and how a call is issued), not the Group, which is its
// core and its paths (pathtable.go) behind the backend's Group interface.
// Holding runMu, Run prepares what can fail on this rank alone (the stream's
// fence, lc's staging: a failure refuses the call), publishes the call at
// the gate (callGate.publish: its ticket) and the path issues what goes on
// the stream now: symmem's paths their whole stream program, NCCL's the
// gate's guard and checked mode's handshake fork; core.issue hands a program
// to the executor (edge.go: the driver, one cgo call; tests record instead,
// golden_test.go), and the gate is told it is queued (callGate.enqueued).
// With runMu released the path finishes the call: NCCL's call on its
// communicator and the handshake's join after it (nothing for symmem's
// paths). A failure after publish breaks the group (core.breakWith): the
// peers may be waiting for this rank's call. Run then reports a mismatch the
// kernels found earlier (Group.Fault; the reports: fault.go). Signals the
// copy-engine paths share are in signals.go; the side streams, the transfers
// spread over them and the streams' fences in streams.go.
//
// Tests, benchmarks and the CLI reach this backend only through the user
// API (package symmem; bench/worldtarget for the bench harness).
//
// All driver access goes through internal/native/cudadrv; NCCL through
// internal/backend/nccl.
package cuda
