package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// The call gate, always on for a group whose ranks share this host
// (members.CallGate over the HostAgreement's pages). Every collective
// publishes its record (backend.Request.Check) and path before it is
// queued. Copy-engine (ce, lc) and NCCL calls, whose stream memory
// operations and NCCL kernels cannot compare or branch, first make their
// stream wait, with one stream memory operation, until the approval word
// (rank 0's page, registered with this device) reaches the call's number:
// until every rank made the call alike. Hosts run ahead of their GPUs, so
// the approval is usually there before the stream reaches the wait. The
// kernels keep their in-band check (fault.go); the gate catches what that
// check cannot: ranks that took different paths (a kernel here, copy
// engines there), and copy-engine or NCCL calls that differ.
//
// A difference is found by the rank that publishes the call last: its
// call is refused before anything is queued. Every rank whose GPU already
// waits is woken through a futex by its watcher goroutine, which stops its
// context (symmem_stop traps; a stream wait cannot be cancelled, and no
// data of the call moved); the error names the argument that differs. The
// watcher also bounds a gated wait: a peer that does not make the call
// within the watchdog (Options.Watchdog), or whose process exited, stops
// the waiting rank with an error naming it.
//
// Calls captured into a CUDA graph are compared when they are captured;
// their replays pass the gate (checked mode's handshake compares replays).
type callGate struct {
	c        *members.CallGate
	reg      *cudadrv.HostRegistered // rank 0's page, registered here
	word     uint64                  // the approval word's device address
	queued   atomic.Uint64           // the last call this rank queued work for
	waiting  atomic.Uint64           // the last gated call queued (its stream waits for the approval)
	stopOnce sync.Once
	stopped  atomic.Pointer[error] // why the watcher or Run stopped the context
	quit     chan struct{}
	done     chan struct{}
}

// gateTick bounds the watcher's sleep: how often it looks at a gated wait
// that is not yet approved (a difference wakes it at once).
const gateTick = 100 * time.Millisecond

// setupGate creates the group's gate where it can stop a wait: ranks on
// one host (the agreement) and symmem's kernels loaded (the trap).
func (g *Group) setupGate() error {
	if g.agreement == nil || g.b.kern.stop == 0 {
		return nil
	}
	c := g.agreement.Gate()
	reg, err := cudadrv.RegisterHost(g.b.ctx, c.SharedPage())
	if err != nil {
		return fmt.Errorf("call gate: %w", err)
	}
	gt := &callGate{c: c, reg: reg, word: reg.Device() + members.ApprovedOffset, quit: make(chan struct{}), done: make(chan struct{})}
	g.gate = gt
	go g.watchGate(gt)
	return nil
}

// closeGate ends the watcher and, with unregister, unregisters the page
// (before the agreement unmaps it).
func (g *Group) closeGate(unregister bool) {
	gt := g.gate
	if gt == nil {
		return
	}
	close(gt.quit)
	gt.c.Wake() // the peers' watchers look once more and sleep again
	<-gt.done
	if unregister {
		gt.reg.Unregister()
	}
}

// pathCode is the path's code in a gate entry (its place in coll.Algos).
func pathCode(a coll.Algo) uint8 {
	for i, x := range coll.Algos() {
		if x == a {
			return uint8(i + 1)
		}
	}
	return 0
}

func pathName(c uint8) coll.Algo {
	if all := coll.Algos(); c >= 1 && int(c) <= len(all) {
		return all[c-1]
	}
	return coll.Algo(fmt.Sprintf("path %d", c))
}

// gated reports whether calls on path a wait for the gate's approval.
func gated(a coll.Algo) bool {
	switch a {
	case coll.AlgoCE, coll.AlgoLowContention, coll.AlgoNCCL, coll.AlgoNCCLWindow:
		return true
	}
	return false
}

// publish numbers req (on path req.Algo) at the gate and sets g.gateK to
// the number its stream must wait for (0: none). The caller holds runMu
// and, once the call's work is queued, calls queued.
func (g *Group) publish(req backend.Request) error {
	g.gateK = 0
	gt := g.gate
	if gt == nil {
		return nil
	}
	if p := gt.stopped.Load(); p != nil {
		return *p
	}
	wait := gated(req.Algo)
	k, err := gt.c.Publish(context.Background(), members.GateEntry{Rec: req.Check, Path: pathCode(req.Algo), Gated: wait})
	if err != nil {
		var m *members.GateMismatch
		if errors.As(err, &m) {
			return g.gateFailed(m)
		}
		return err
	}
	g.gateN = k
	if wait {
		g.gateK = k
	}
	return nil
}

// gateWait makes stream s wait for the approval of the call being built
// (nothing for calls that do not wait, or without a gate).
func (g *Group) gateWait(p *cudadrv.Program, s uint64) {
	if g.gateK != 0 {
		p.Wait32(s, g.gate.word, uint32(g.gateK))
	}
}

// queued notes that the call publish numbered is on the GPU; a difference
// found meanwhile stops it now. The caller holds runMu.
func (g *Group) queued() error {
	gt := g.gate
	if gt == nil {
		return nil
	}
	gt.queued.Store(g.gateN)
	if g.gateK != 0 {
		gt.waiting.Store(g.gateK)
	}
	if m := gt.c.Failed(); m != nil {
		return g.gateFailed(m)
	}
	return nil
}

// gateFailed is the error for difference m: where this rank queued work
// for the call (or after it), its context is stopped first. The caller
// holds runMu; the group is broken either way (the ranks' calls diverged).
func (g *Group) gateFailed(m *members.GateMismatch) error {
	gt := g.gate
	var err error
	if gt.queued.Load() >= m.Call {
		err = g.stopDevice(g.gateError(m, true))
	} else {
		err = g.gateError(m, false)
	}
	g.broken = err
	return err
}

// gateError names the difference: the argument with both values, or the
// paths; stopped says whether this rank's context was stopped for it.
func (g *Group) gateError(m *members.GateMismatch, stopped bool) error {
	r0, rq := g.ranks[0], g.ranks[max(m.Rank, 0)]
	kind := backend.CallKind(m.Rank0.Rec)
	var what string
	switch arg, va, vb, ok := backend.CallDiff(m.Theirs.Rec, m.Rank0.Rec); {
	case m.Rank < 0:
		what = "the ranks' entries differ"
	case m.Theirs.Rec == m.Rank0.Rec:
		what = fmt.Sprintf("rank %d ran it on %s, rank %d on %s (every rank must force the same algorithm, and pass arguments for which auto chooses alike)",
			rq, pathName(m.Theirs.Path), r0, pathName(m.Rank0.Path))
	case ok && arg == "collective":
		what = fmt.Sprintf("rank %d called %v, rank %d %v (every rank must make the same collectives in the same order)", rq, va, r0, vb)
	case ok:
		what = fmt.Sprintf("rank %d called %s with %s=%v, rank %d with %s=%v (every rank must pass the same; buffers at the same pool offset: allocate them with the same Alloc calls in the same order)",
			rq, kind, arg, va, r0, arg, vb)
	default:
		what = fmt.Sprintf("rank %d's record %x, rank %d's %x", rq, m.Theirs.Rec, r0, m.Rank0.Rec)
	}
	outcome := "nothing was queued for it on this rank, and the group cannot be used any more (the ranks' calls diverged): close it"
	if stopped {
		outcome = "this rank's copy-engine or NCCL calls were waiting for every rank to agree, so symmem stopped them before any data of the call moved: this process's CUDA context is lost, restart it"
	}
	return fmt.Errorf("cuda: group %q: collective %d on the group (%v): %s; %s: %w", g.name, m.Call, kind, what, outcome, errs.Mismatch)
}

// stopDevice ends every wait this process's streams are in by trapping (the
// context is lost) and returns why, once: later calls return the first
// reason.
func (g *Group) stopDevice(why error) error {
	gt := g.gate
	gt.stopOnce.Do(func() {
		gt.stopped.Store(&why)
		if err := g.trap(); err != nil {
			why = fmt.Errorf("%w (and stopping the device failed: %v)", why, err)
			gt.stopped.Store(&why)
		}
	})
	return *gt.stopped.Load()
}

// trap launches symmem_stop on a stream of its own (the group's streams
// may wait behind the gate).
func (g *Group) trap() error {
	s, err := cudadrv.NewStream(g.b.ctx, 0)
	if err != nil {
		return err
	}
	args := cudadrv.NewArgs(kernArgBytes)
	p := cudadrv.NewProgram(2)
	p.SetContext(g.b.ctx)
	p.Launch(s.Handle(), g.b.kern.stop, args, 1, 1)
	return p.Exec() // the stream and args stay: the context is lost anyway
}

// watchGate is the gate's watcher (one goroutine per group): it sleeps on
// the gate's futex and stops the context when a difference is found while
// this rank's GPU has the call queued, or when a gated wait is overdue (a
// peer that exited at once, one that does not make the call within the
// watchdog).
func (g *Group) watchGate(gt *callGate) {
	defer close(gt.done)
	var stuck uint64 // the call a gated wait is stuck at
	var since time.Time
	for {
		gt.c.Sleep(gateTick)
		select {
		case <-gt.quit:
			return
		default:
		}
		if gt.stopped.Load() != nil {
			continue
		}
		if m := gt.c.Failed(); m != nil {
			if gt.queued.Load() >= m.Call {
				g.stopDevice(g.gateError(m, true))
			}
			continue
		}
		a := gt.c.Approved()
		if gt.waiting.Load() <= a {
			stuck = 0
			continue
		}
		k := a + 1
		if k != stuck {
			stuck, since = k, time.Now()
		}
		q, exited := gt.c.Missing(k)
		switch {
		case q < 0:
		case exited:
			g.stopDevice(fmt.Errorf("cuda: group %q: rank %d exited before it made collective %d on the group, which this rank's stream waits for: this process's CUDA context is stopped (lost), restart it: %w",
				g.name, gt.c.Rank(q), k, errs.PeerExited))
		case time.Since(since) > g.b.watchdog:
			g.stopDevice(fmt.Errorf("cuda: group %q: rank %d did not make collective %d on the group within the watchdog (%v), and this rank's stream waits for it: every rank must make the same collectives; this process's CUDA context is stopped (lost), restart it: %w",
				g.name, gt.c.Rank(q), k, g.b.watchdog, rendezvous.ErrTimeout))
		}
	}
}
