package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/rendezvous"
)

// guardKernel is the gate's guard: a gated call's stream waits in it for
// the approval.
var guardKernel = declareKernel("handshake.ptx", "symmem_gate_guard")

// The call gate, always on for a group whose ranks share this host
// (members.CallGate over the HostAgreement's pages), and, comparing only,
// among the members on this host of a group that spans hosts (hostGate,
// below). Every collective
// publishes its record (backend.Request.Record) and path before it is
// queued; whichever rank finds every peer's entry for the next call
// compares them and approves it. The kernels keep their in-band check
// (fault.go); the gate catches what that check cannot: ranks that took
// different paths (a kernel here, copy engines there), and copy-engine
// (ce, lc) or NCCL calls that differ, whose stream memory operations and
// NCCL kernels cannot compare or branch.
//
// A gated call (ce, lc, NCCL) that is approved when this rank publishes it
// (it published last, or the others' hosts were ahead), or within a short
// wait after (gateSpin, adaptive), queues nothing more. Otherwise its
// stream runs the guard first (symmem_gate_guard, one thread): it ends when
// the approval comes and traps when the gate records a difference at or
// before the call, or after the watchdog (Options.Watchdog, the user's
// Options.GPU.Watchdog) — the trap ends the context before any data of the
// call moved. A running kernel is the only stop that works here: a stream
// memory operation waiting on the approval word cannot be cancelled, and a
// trap launched after it may never start, because waiting streams block the
// device's work queues (TestTrapEndsWait). Of the placements that can stop
// a call, the guard inline on the call's stream costs the least busbw.
//
// The rank that finds a difference gets it from its call, which queued
// nothing; the others' guards stop them (a trap: the context is lost). The
// watcher goroutine marks the gate failed when a peer exited, closed or
// failed before a call this rank queued (Abandon). symmem's kernels read
// the failed word (P.stop) once a wait has spun 100 us, so a kernel
// waiting for that call, or for peers that took a gated path, stops
// waiting and ends with a report instead of spinning until its watchdog:
// no trap, the context stays (a trap costs the driver's fault recovery,
// up to a second per GPU when several fault at once). A peer that dies
// after it published the call, inside the kernel, is still bounded by the
// kernel's watchdog unless a later call is abandoned. The errors name the
// argument that differs, the paths, or the missing rank, and say what
// became of this rank's work (outcome).
//
// Calls captured into a CUDA graph are compared when they are captured
// and get no guard (capturing); their replays are not compared (checked
// mode's handshake compares replays).
type callGate struct {
	g         *core
	ag        *members.HostAgreement // whose gate it is
	members   []int                  // the group index of each of ag's members (nil: the same)
	abort     func(error)            // a host gate's answer to a difference (nil: a guarding gate)
	c         *members.CallGate
	reg       *cudadrv.HostRegistered // rank 0's page, registered here
	args      *cudadrv.Args           // the guard's parameter block (copied at each launch)
	failedDev uint64                  // the failed word as the device sees it (the kernels' P.stop)
	queued    atomic.Uint64           // the last call this rank queued work for
	waiting   atomic.Uint64           // the last gated call queued (its stream waits for the approval)
	spin      time.Duration           // how long a gated call's host waits for its approval (approvedSoon; runMu)
	stopOnce  sync.Once
	stopped   atomic.Pointer[error] // why the watcher or Run stopped the context
	quit      chan struct{}
	done      chan struct{}
}

// gateTick bounds the watcher's sleep: how often it looks at a gated wait
// that is not yet approved (a difference wakes it at once).
const gateTick = 100 * time.Millisecond

// newCallGate creates g's gate where it can stop a wait (nil where it
// cannot): ranks on one host (the agreement) and symmem's modules loaded
// (the guard).
func newCallGate(g *core) (*callGate, error) {
	if g.ag.group == nil || g.b.kern.fn(guardKernel) == 0 {
		return nil, nil
	}
	c := g.ag.group.Gate()
	reg, err := cudadrv.RegisterHost(g.b.ctx, c.SharedPage())
	if err != nil {
		return nil, fmt.Errorf("call gate: %w", err)
	}
	gt := &callGate{g: g, ag: g.ag.group, c: c, reg: reg, args: cudadrv.NewArgs(kernArgBytes), quit: make(chan struct{}), done: make(chan struct{})}
	gt.args.PutU64(guardApproved, reg.Device()+members.ApprovedOffset)
	gt.failedDev = reg.Device() + members.FailedOffset
	gt.args.PutU64(guardFailed, gt.failedDev)
	gt.args.PutU64(argTimeout, uint64(g.b.watchdog.Nanoseconds()))
	go gt.watch()
	return gt, nil
}

// hostGate is the gate of a group that spans hosts, among the members on
// this host (agreements.host): their calls are compared as on one host, at no
// cost between hosts, but no call waits for an approval (no guard: a
// trap would cost the context where a member exits, which the NCCL abort
// of a gone member spares). A difference found, or a member here that
// exited before a call it never made, goes to abort — the group's
// abortGroup: its NCCL communicators are aborted (kernels waiting in them
// end) and every later call and Synchronize fails with the difference.
// Calls that differ between hosts only are compared after the fact, by the
// group's call log (members.CallLog, docs/multihost.md).
func hostGate(g *core, abort func(error)) *callGate {
	gt := &callGate{g: g, ag: g.ag.host, members: g.ag.hostMembers, abort: abort, c: g.ag.host.Gate(),
		quit: make(chan struct{}), done: make(chan struct{})}
	go gt.watch()
	return gt
}

// rankOf is the group rank of the gate's member q.
func (gt *callGate) rankOf(q int) int {
	if gt.members != nil {
		q = gt.members[q]
	}
	return gt.g.Ranks[q]
}

// close ends the watcher and, with unregister, unregisters the page
// (before the agreement unmaps it). Nothing without a gate.
func (gt *callGate) close(unregister bool) error {
	if gt == nil {
		return nil
	}
	close(gt.quit)
	gt.c.Wake() // the peers' watchers look once more and sleep again
	<-gt.done
	if unregister && gt.reg != nil {
		gt.args.Free()
		if err := gt.reg.Unregister(); err != nil {
			return fmt.Errorf("call gate: %w", err)
		}
	}
	return nil
}

// stopWord is the failed word as the device sees it (0 without a gate):
// symmem's kernels stop waiting once it is set (P.stop).
func (gt *callGate) stopWord() uint64 {
	if gt == nil {
		return 0
	}
	return gt.failedDev
}

// publish numbers c (on path c.req.Algo, whose calls wait for the
// approval where wait: the path table's gated) at the gate and sets its
// ticket: its number and the number its stream must wait for (0: none;
// always, without a gate). The caller holds runMu and, once the call's
// work is queued, calls enqueued.
func (gt *callGate) publish(c *call, wait bool) error {
	if gt == nil {
		return nil
	}
	req := &c.req
	if p := gt.stopped.Load(); p != nil {
		return *p
	}
	k, err := gt.c.Publish(context.Background(), members.GateEntry{Record: req.Record, Path: agree.PathCode(req.Algo), Gated: wait})
	if err != nil {
		var m *members.GateMismatch
		if errors.As(err, &m) {
			return gt.fail(m)
		}
		return err
	}
	c.gate = ticket{n: k}
	if wait && gt.abort == nil && !gt.approvedSoon(k) && !gt.capturing(req.Stream) {
		c.gate.wait = k
	}
	return nil
}

// capturing reports whether stream s is being captured into a CUDA graph.
// A captured call moves no data now, and a guard captured with it would
// compare its replays against a call number that wraps after 2^31 calls,
// so captured calls get none: they were compared when published. An
// error to ask counts as not capturing: the guard is queued (its launch
// then reports what is wrong with the stream).
func (gt *callGate) capturing(s uint64) bool {
	c, err := gt.g.x.capturing(gt.g.b.ctx, s)
	return err == nil && c
}

// gateSpin bounds how long a gated call's host waits for its approval
// before it queues the guard instead: the peers' hosts usually publish
// within microseconds, and a call approved at publish runs with nothing
// more on the GPU, where the guard costs a kernel launch on the call's
// critical path. The calls gated are large (copy engines, NCCL: tens of
// microseconds on the GPU and more), so their hosts are usually ahead of
// the GPU and the wait hides behind it. A wait that ran out halves the
// next one (down to gateSpinMin): when the peers' hosts are far behind,
// waiting buys nothing; one that was answered restores it. 20 us keeps
// ce/lc busbw at par with the gate-free build, where 5 us costs GPU time
// for less host time.
const (
	gateSpin    = 20 * time.Microsecond
	gateSpinMin = 2 * time.Microsecond
)

// approvedSoon reports whether call k is approved within the current wait
// (a difference found meanwhile ends it: the guard reports it), and
// adapts the wait. The caller holds runMu.
func (gt *callGate) approvedSoon(k uint64) bool {
	if gt.spin == 0 {
		gt.spin = gateSpin
	}
	wait.Spin(gt.spin, func() bool { return gt.c.Approved() >= k || gt.c.Failed() != nil })
	if gt.c.Approved() >= k {
		gt.spin = gateSpin
		return true
	}
	gt.spin = max(gt.spin/2, gateSpinMin)
	return false
}

// guard runs the guard on stream s for the call with ticket t when it was
// not approved at publish (nothing otherwise, or without a gate: t.wait is
// 0). It must be the call's first stream operation.
func (gt *callGate) guard(p *cudadrv.Program, s uint64, t ticket) {
	if t.wait == 0 {
		return
	}
	gt.args.PutU32(guardCall, uint32(t.wait))
	p.Launch(s, gt.g.b.kern.fn(guardKernel), gt.args, 1, 1)
}

// enqueued notes that the call with ticket t is on the GPU; a difference
// found meanwhile stops it now. The caller holds runMu.
func (gt *callGate) enqueued(t ticket) error {
	if gt == nil {
		return nil
	}
	gt.queued.Store(t.n)
	if t.wait != 0 {
		gt.waiting.Store(t.wait)
	}
	if m := gt.c.Failed(); m != nil {
		return gt.fail(m)
	}
	return nil
}

// fail is the error for difference m. Where a guard of this rank waits
// for the call or a later one, the guard traps anyway, so the context is
// stopped now; where only kernels were queued for it, they stop waiting on
// their own (they poll the failed word: pollStop in ptxgen) and the context
// stays. The caller holds runMu; the group is broken either way (the
// ranks' calls diverged).
func (gt *callGate) fail(m *members.GateMismatch) error {
	var err error
	switch {
	case gt.abort != nil:
		err = gt.aborted(m)
	case gt.waiting.Load() >= m.Call:
		err = gt.stopDevice(gt.mismatch(m, outcomeStopped))
	case gt.queued.Load() >= m.Call:
		err = gt.mismatch(m, outcomeEnded)
	default:
		err = gt.mismatch(m, outcomeNothing)
	}
	gt.g.broken = err
	return err
}

// outcome is what became of this rank's work for a failed call, as its
// error tells the user.
type outcome int

const (
	outcomeNothing outcome = iota // nothing was queued for it
	outcomeStopped                // a guard (or the watcher) trapped: the context is lost
	outcomeEnded                  // its kernels stopped waiting and ended: the context is intact
	outcomeAborted                // the group's NCCL communicators were aborted: the context is intact
)

func (o outcome) String() string {
	switch o {
	case outcomeStopped:
		return "this rank's stream waited for it, and a GPU stream cannot be cancelled, so symmem stopped this process's CUDA context: the context is lost, restart the process"
	case outcomeAborted:
		return "the group's NCCL communicators were aborted (calls waiting in them end): the outputs of the calls in flight on the group are not valid, " +
			"this process's CUDA context is intact; the group cannot be used any more: close it (other groups go on)"
	case outcomeEnded:
		return "this rank's kernels waiting for it stopped waiting and ended: the outputs of the calls in flight on the group are not valid, this process's CUDA context is intact; " +
			"the group cannot be used any more: close it (other groups go on)"
	}
	return "nothing was queued for it on this rank, and the group cannot be used any more: close it"
}

// aborted is a host gate's answer to m (once; later calls get the first
// error): the difference, or the exit, through abort.
func (gt *callGate) aborted(m *members.GateMismatch) error {
	err := gt.mismatch(m, outcomeAborted)
	gt.stopOnce.Do(func() { gt.abort(err) })
	return err
}

// ended is the error of a kernel that reported it stopped waiting because
// the gate failed (fault.go): the gate's difference or abandonment.
func (gt *callGate) ended() error {
	if gt != nil {
		if m := gt.c.Failed(); m != nil {
			return gt.mismatch(m, outcomeEnded)
		}
	}
	return fmt.Errorf("cuda: a kernel stopped waiting for a peer although the call gate did not fail (not expected): the group cannot be used any more: %w", errs.Broken)
}

// mismatch names the difference: the argument with both values, or the
// paths, and what became of this rank's work for it.
func (gt *callGate) mismatch(m *members.GateMismatch, out outcome) error {
	g := gt.g
	if m.Abandoned {
		return gt.exited(m.Call, m.Missing, out)
	}
	kind := agree.Kind(m.Rank0.Record)
	what := "the ranks' entries differ" // no rank's entry differs from rank 0's: not expected
	if m.Rank >= 0 {
		var ok bool
		r0, rq := gt.rankOf(0), gt.rankOf(m.Rank)
		theirs, mine := agree.Call{Record: m.Theirs.Record, Path: agree.PathOf(m.Theirs.Path)}, agree.Call{Record: m.Rank0.Record, Path: agree.PathOf(m.Rank0.Path)}
		if what, ok = agree.Explain(rq, theirs, r0, mine); !ok {
			what = fmt.Sprintf("rank %d's entry %x, rank %d's %x", rq, m.Theirs.Record, r0, m.Rank0.Record)
		}
	}
	return fmt.Errorf("cuda: group %q: collective %d on the group (%v): %s; %s: %w", g.GroupName, m.Call, kind, what, out, errs.Mismatch)
}

// exited is the error of a call abandoned because group rank q will never
// make it: its process exited, or it closed or failed (its state word
// says which).
func (gt *callGate) exited(k uint64, q int, out outcome) error {
	g := gt.g
	rank := "a rank"
	if q >= 0 {
		rank = fmt.Sprintf("rank %d", gt.rankOf(q))
		if gt.ag != nil {
			if gone := gt.ag.Gone(q, false); gone != nil && !errors.Is(gone, errs.PeerExited) {
				return fmt.Errorf("cuda: group %q: collective %d on the group was abandoned; %s: %w", g.GroupName, k, out, gone)
			}
		}
	}
	return fmt.Errorf("cuda: group %q: %s exited before it made collective %d on the group; %s: %w", g.GroupName, rank, k, out, errs.PeerExited)
}

// stall is the error of a guard's watchdog: call k was not approved in
// time.
func (gt *callGate) stall(k uint64) error {
	g := gt.g
	q, _ := gt.c.Missing(k)
	rank := "every rank made it, yet it was not approved"
	if q >= 0 {
		rank = fmt.Sprintf("rank %d did not make it", gt.rankOf(q))
	}
	return fmt.Errorf("cuda: group %q: collective %d on the group was not approved within the watchdog (%v): %s (every rank must make the same collectives); "+
		"its guard stopped this process's CUDA context (lost): restart it: %w", g.GroupName, k, g.b.watchdog, rank, rendezvous.ErrTimeout)
}

// stoppedErr explains a launch failure after the gate stopped this rank
// (nil if it did not, or without a gate): the difference or abandonment
// it recorded, else a guard's watchdog.
func (gt *callGate) stoppedErr() error {
	if gt == nil || gt.abort != nil { // a host gate stops nothing on the device: its errors are the group's gone error
		return nil
	}
	if p := gt.stopped.Load(); p != nil {
		return *p
	}
	if m := gt.c.Failed(); m != nil {
		if gt.queued.Load() >= m.Call {
			return gt.mismatch(m, outcomeStopped)
		}
		return nil
	}
	if a := gt.c.Approved(); gt.waiting.Load() > a {
		return gt.stall(a + 1)
	}
	return nil
}

// stopDevice ends every wait this process's streams are in by trapping (the
// context is lost) and returns why, once: later calls return the first
// reason.
func (gt *callGate) stopDevice(why error) error {
	gt.stopOnce.Do(func() {
		gt.stopped.Store(&why)
		if err := gt.trap(); err != nil {
			why = fmt.Errorf("%w (and stopping the device failed: %v)", why, err)
			gt.stopped.Store(&why)
		}
	})
	return *gt.stopped.Load()
}

// trap launches a guard that stops at once (a call the approval cannot
// reach before the gate's recorded failure) on a stream of its own. Best
// effort: when the device's work queues are blocked it may not start.
func (gt *callGate) trap() error {
	g := gt.g
	s, err := cudadrv.NewStream(g.b.ctx, 0)
	if err != nil {
		return err
	}
	args := cudadrv.NewArgs(kernArgBytes)
	copy(args.Bytes(), gt.args.Bytes())
	args.PutU32(guardCall, uint32(gt.c.Approved()+1<<30))
	p := cudadrv.NewProgram(2)
	p.SetContext(g.b.ctx)
	p.Launch(s.Handle(), g.b.kern.fn(guardKernel), args, 1, 1)
	return g.x.program(p) // the stream and args stay: the context is lost anyway
}

// watch is the gate's watcher (one goroutine per group, asleep on the
// gate's futex): when a call this rank queued is not approved and the rank
// it waits for has exited, closed or failed, it abandons the call: every
// guard from it on traps (a copy-engine or NCCL wait cannot be stopped
// otherwise: the context is lost), and every kernel waiting for it stops
// waiting and ends with a report (the context stays). Once the gate
// failed it has nothing more to do.
func (gt *callGate) watch() {
	defer close(gt.done)
	for {
		gt.c.Sleep(gateTick)
		select {
		case <-gt.quit:
			return
		default:
		}
		if m := gt.c.Failed(); m != nil && gt.abort != nil {
			gt.aborted(m)
			return // a host gate has nothing more to watch
		}
		if gt.stopped.Load() != nil || gt.c.Failed() != nil {
			continue
		}
		// A call this rank queued (a gated wait, or a kernel spinning on
		// the device for its peers) that a gone rank never made.
		if a := gt.c.Approved(); gt.queued.Load() > a {
			if q, gone := gt.c.Missing(a + 1); q >= 0 && gone != nil {
				gt.c.Abandon(a + 1)
			}
		}
	}
}
