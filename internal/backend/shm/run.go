package shm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// All-reduces whose tensor, times the peers (n-1), is at most this many
// bytes use the one-shot plan out of place: every rank reads every peer's
// whole tensor instead of 1/n of it, and saves a barrier and a stage. In
// place, one-shot also copies the result back from scratch, so it is used
// only up to oneShotInPlace. Both limits sit below the sizes where two-shot
// is faster (BenchmarkLocal).
const (
	oneShotPeerBytes = 1 << 20
	oneShotInPlace   = 64 << 10
)

// oneShot reports whether an all-reduce of bytes on n ranks uses the
// one-shot plan.
func oneShot(n int, bytes int64, inPlace bool) bool {
	peers := int64(max(n-1, 1))
	if inPlace {
		return bytes*peers <= oneShotInPlace
	}
	return bytes*peers <= oneShotPeerBytes
}

// Run executes one collective on symmetric buffers (the direct path) by
// interpreting the plan package's schedule for this rank. The user API
// validated req and staged ordinary memory already; Run refuses buffers
// that are not registered with the group.
func (g *Group) Run(ctx context.Context, req backend.Request) (coll.Path, error) {
	if req.Algo != "" && req.Algo != coll.AlgoAuto && req.Algo != coll.AlgoDirect {
		return coll.Path{}, fmt.Errorf("shm: group %q: algorithm %q is not available on the CPU backend (want %q)", g.GroupName, req.Algo, coll.AlgoDirect)
	}
	g.runMu.Lock()
	defer g.runMu.Unlock()
	if g.broken != nil {
		return coll.Path{}, g.broken
	}
	splits := req.Kind == coll.AllToAll && req.A2A.Kind() != backend.SplitsEqual
	var p plan.Plan
	x := &g.x
	if splits {
		*x = exec{}
	} else {
		var err error
		if p, err = g.planFor(req); err != nil {
			return coll.Path{}, fmt.Errorf("shm: group %q: %v: %w", g.GroupName, req.Kind, err)
		}
		if x, err = g.prepare(req, p); err != nil {
			return coll.Path{}, fmt.Errorf("shm: group %q: %v: %w", g.GroupName, req.Kind, err)
		}
	}
	x.ctx = ctx
	defer func() { x.ctx = nil }() // the group's exec outlives the call
	x.deadline = time.Now().Add(g.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(x.deadline) {
		x.deadline = d
	}
	g.calls++
	var err error
	if splits {
		err = g.runSplits(x, req)
	} else if err = g.check(req, p, x); err != nil {
		return coll.Path{}, fmt.Errorf("shm: group %q: %v #%d: %w", g.GroupName, req.Kind, g.calls, err)
	} else {
		err = g.execute(x)
	}
	if err != nil {
		if x.mismatch {
			// Every rank saw it after phase 0 and stopped there.
			g.epoch++
			return coll.Path{}, fmt.Errorf("shm: group %q: %v #%d: %w", g.GroupName, req.Kind, g.calls, err)
		}
		if x.signalled {
			// Peers may be mid-call: the epochs no longer line up.
			g.breakOn(err)
		}
		return coll.Path{}, fmt.Errorf("shm: group %q: %v #%d: %w", g.GroupName, req.Kind, g.calls, g.rootCause(err))
	}
	if splits {
		return coll.Path{Algo: coll.AlgoDirect, Reason: reasonSplits}, nil
	}
	g.epoch += uint32(p.Phases)
	reason := reasonDirect
	if req.Kind == coll.AllReduce {
		reason = reasonTwoShot
		if p.OneShot {
			reason = reasonOneShot
		}
	}
	return coll.Path{Algo: coll.AlgoDirect, Reason: reason}, nil
}

// Path reasons, constants so that a call builds no string.
const (
	reasonDirect  = "symmetric buffers: peers read each other's shared-memory copies"
	reasonOneShot = reasonDirect + " (one-shot)"
	reasonTwoShot = reasonDirect + " (two-shot)"
	reasonSplits  = reasonDirect + ", after reading every rank's split counts"
)

// check arranges the in-band comparison of req.Record (agree.go): on the
// plan's phase 0 when every peer waits for every other there before reading
// peer data, else in an agreement phase of its own, run now.
func (g *Group) check(req backend.Request, p plan.Plan, x *exec) error {
	if req.Record == (agree.Record{}) || g.pads.n == 1 {
		return nil
	}
	if req.Kind == coll.Broadcast || len(p.Steps) == 0 {
		err := g.agreeLocked(x.ctx, req.Record, x.deadline)
		if err == nil {
			// The peers passed the agreement with this rank and may be in
			// the plan: a failure from here on breaks the group (a
			// broadcast's root would wait, or succeed, alone).
			x.signalled = true
		} else if agree.AsDisagreement(err) == nil {
			err = g.rootCause(err)
		}
		return err
	}
	x.check, x.rec = true, g.records
	g.records++
	g.pads.put(x.rec, g.epoch+1, req.Record)
	return nil
}

// planFor returns this rank's plan for req, from the group's cache.
func (g *Group) planFor(req backend.Request) (plan.Plan, error) {
	es := int64(req.DType.Size())
	spec := plan.Spec{Kind: req.Kind, N: len(g.Ranks), Rank: g.Me, Count: req.Count, DType: req.DType, Root: req.Root}
	switch req.Kind {
	case coll.AllGather:
		spec.InPlace = req.InPlace
	case coll.ReduceScatter:
		spec.Op, spec.InPlace = req.Op, req.InPlace
	case coll.AllReduce:
		spec.Op, spec.InPlace = req.Op, req.InPlace
		spec.OneShot = oneShot(len(g.Ranks), req.Count*es, req.InPlace)
	}
	if g.last.ok && g.last.spec == spec {
		return g.last.p, nil
	}
	p, ok := g.plans[spec]
	if !ok {
		var err error
		if p, err = plan.Build(spec); err != nil {
			return plan.Plan{}, err
		}
		if len(g.plans) >= 256 {
			clear(g.plans)
		}
		g.plans[spec] = p
	}
	g.last.spec, g.last.p, g.last.ok = spec, p, true
	return p, nil
}

// exec is one call in progress.
type exec struct {
	p         plan.Plan
	ctx       context.Context
	deadline  time.Time
	in, out   *peerSeg // mappings of the segments holding plan In and Out
	inOff     int64
	outOff    int64
	scratch   []byte
	signalled bool   // this rank has signalled peers during the call
	check     bool   // compare records once every peer's phase 0 arrived
	rec       uint64 // this call's record slot number
	heard     int    // peers whose phase 0 arrived
	mismatch  bool   // the records differed: stopped after phase 0
}

// prepare maps the plan's In and Out onto the request's symmetric spans.
// In-place plans use Out only, and Out is the whole tensor: for an in-place
// reduce-scatter that is the request's In. The exec is the group's own,
// reused by every call (runMu).
func (g *Group) prepare(req backend.Request, p plan.Plan) (*exec, error) {
	x := &g.x
	*x = exec{p: p}
	in, out := req.InSym, req.OutSym
	inLen, outLen := req.In.Len, req.Out.Len
	if p.InPlace && req.Kind == coll.ReduceScatter {
		out, outLen = req.InSym, req.In.Len
	}
	look := func(what string, s backend.Sym, have, need int64) (*peerSeg, error) {
		if have < need {
			return nil, fmt.Errorf("%s holds %d bytes, the plan needs %d", what, have, need)
		}
		if !s.OK {
			return nil, fmt.Errorf("%s is not a symmetric buffer registered with the group (stage it through the pool)", what)
		}
		ps, ok := g.segs.Get(s.Seg)
		if !ok {
			return nil, fmt.Errorf("%s lies in segment %d, which is not registered with the group (end a scope of this group first)", what, s.Seg)
		}
		if s.Off < 0 || s.Off+need > ps.size {
			return nil, fmt.Errorf("%s [%d, %d) exceeds segment %d of %d bytes", what, s.Off, s.Off+need, s.Seg, ps.size)
		}
		return ps, nil
	}
	var err error
	if p.OutBytes > 0 {
		if x.out, err = look("out", out, outLen, p.OutBytes); err != nil {
			return nil, err
		}
		x.outOff = out.Off
	}
	if p.InBytes > 0 || p.Splits { // a split plan reads peers' In even where this rank sends nothing
		if x.in, err = look("in", in, inLen, p.InBytes); err != nil {
			return nil, err
		}
		x.inOff = in.Off
	}
	if p.ScratchBytes > 0 {
		if int64(len(g.scratch)) < p.ScratchBytes {
			g.scratch = make([]byte, p.ScratchBytes)
		}
		x.scratch = g.scratch[:p.ScratchBytes]
	}
	return x, nil
}

// mem resolves a plan reference to n bytes of memory.
func (x *exec) mem(r plan.Ref, n int64) []byte {
	switch r.Buf {
	case plan.In:
		return hostmem.Bytes(x.in.bases[r.Rank]+uint64(x.inOff+r.Off), int(n))
	case plan.Out:
		return hostmem.Bytes(x.out.bases[r.Rank]+uint64(x.outOff+r.Off), int(n))
	default:
		return x.scratch[r.Off : r.Off+n]
	}
}

// execute runs the plan's steps: sync steps one by one, and each stage of
// data steps (independent by the plan's contract) through the group's
// crew, which shares them among worker goroutines. The task and source
// lists are the group's, reused by every stage: a call allocates nothing.
func (g *Group) execute(x *exec) error {
	steps := x.p.Steps
	for i := 0; i < len(steps); {
		s := steps[i]
		switch s.Op {
		case plan.Signal:
			x.signalled = true
			if err := g.pads.signal(s.Peer, g.epoch+uint32(s.Phase)+1); err != nil {
				return err
			}
			i++
			continue
		case plan.Wait:
			if err := g.pads.wait(x.ctx, s.Peer, g.epoch+uint32(s.Phase)+1, x.deadline, g.alive); err != nil {
				return g.waitError(x, i, err)
			}
			if x.check && s.Phase == 0 {
				if x.heard++; x.heard == g.pads.n-1 {
					if d := g.pads.compare(x.rec); d != nil {
						x.mismatch = true
						return d
					}
				}
			}
			i++
			continue
		}
		ts, srcs := g.tasks[:0], g.srcs[:0]
		for ; i < len(steps) && !steps[i].IsSync(); i++ {
			d := steps[i]
			at := len(srcs)
			for _, r := range d.Srcs {
				srcs = append(srcs, x.mem(r, d.Bytes))
			}
			// If srcs grew, earlier tasks keep the old array: still valid.
			ts = append(ts, task{dst: x.mem(d.Dst, d.Bytes), srcs: srcs[at:len(srcs):len(srcs)], reduce: d.Op == plan.Reduce})
		}
		g.tasks, g.srcs = ts, srcs
		if err := g.crew.run(ts, x.p.DType, x.p.Op); err != nil {
			return err
		}
	}
	return nil
}

// waitError names the rank a Wait at step i failed on and every other peer
// this rank still waits for in the same phase.
func (g *Group) waitError(x *exec, i int, err error) error {
	s := x.p.Steps[i]
	var late []int
	for _, t := range x.p.Steps[i+1:] {
		if t.Op == plan.Wait && t.Phase == s.Phase && !g.pads.arrived(t.Peer, g.epoch+uint32(t.Phase)+1) {
			late = append(late, g.Ranks[t.Peer])
		}
	}
	err = fmt.Errorf("rank %d, phase %d of %d: %w", g.Ranks[s.Peer], s.Phase, x.p.Phases, err)
	if len(late) > 0 && !errors.Is(err, errs.PeerExited) {
		err = fmt.Errorf("%w (ranks %v have not signalled either)", err, late)
	}
	return err
}

// rootCause makes a dead peer's error lead to the first death in the job.
// The first rank to see a peer die records it in the store; a survivor that
// then gives up and exits looks dead to the others, so their errors would
// name it instead: they add the recorded first death (best effort, 1 s).
func (g *Group) rootCause(err error) error {
	var pe *PeerExitedError
	if !errors.As(err, &pe) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	key := fmt.Sprintf("symmem/%s/first-dead", g.b.env.JobID)
	first, swapped, serr := g.Store.CompareSet(ctx, key, nil, []byte(strconv.Itoa(pe.Rank)))
	if serr != nil || swapped || string(first) == strconv.Itoa(pe.Rank) {
		return err
	}
	return fmt.Errorf("%w (rank %s died first)", err, first)
}
