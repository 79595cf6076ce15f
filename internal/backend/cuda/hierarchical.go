package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/cuda/internal/hier"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/pool"
)

// hierPath is the hierarchical path (algorithm hier) of a group whose
// ranks sit on several hosts, L ranks on each, consecutive in the group:
// the schedules of internal/backend/cuda/internal/hier, executed as
// collectives on two child groups of this rank, created at the group's
// first hier call: its host's ranks (symmem's intra-host paths, chosen by
// auto) and its local index's ranks across hosts (NCCL), plus copies on
// the call's stream. Everything is queued on the call's stream, in order,
// so the call is one stream-ordered collective like any other.
//
// auto does not take it (no measurement shows it ahead yet: issue 27); a
// call forces it with algorithm hier.
type hierPath struct {
	g      *core
	row    *pathInfo
	layout *hier.Layout // nil: the group cannot take the path (why)
	why    string

	mu   sync.Mutex     // one hier call, registration or close at a time
	segs []pool.Segment // the group's segments, in registration order (replayed into the children)
	kids atomic.Pointer[hierKids]
	// stopMaking cancels the children's creation while it waits for peers
	// (set only then): the group's abort ends it at once, where a rank
	// whose peers took another path would wait for them until the timeout.
	stopMaking atomic.Pointer[context.CancelCauseFunc]
}

// hierKids are the child groups.
type hierKids struct{ host, cross *Group }

// decide says whether the group can take the path, from its topology
// (hosts numbered by first appearance, alike on every rank): it sets
// layout, or why not.
func (h *hierPath) decide(t topology) {
	host, spans := t.hostOf, t.spans
	g := h.g
	l, err := hier.NewLayout(host)
	switch {
	case !spans:
		h.why = "ranks on several hosts (this group is on one)"
	case err != nil:
		h.why = "the same number of ranks on every host (" + strings.TrimPrefix(err.Error(), "hier: ") + ")"
	case !l.Blocked():
		h.why = fmt.Sprintf("every host's ranks consecutive in the group (hosts by group rank: %v)", host)
	case l.Local() < 2:
		h.why = "two or more ranks on each host (with one, NCCL alone is the schedule)"
	case g.FDs == nil:
		h.why = "the fd exchange (the host's ranks share memory through it)"
	default:
		h.layout = l
	}
}

func (h *hierPath) refuse(c call) error { return refused(c, h.whyNot(c.req)) }

func (h *hierPath) whyNot(req backend.Request) error {
	if h.layout == nil {
		return fmt.Errorf("the hierarchical path needs %s: %w", h.why, errs.NotSupported)
	}
	if !h.row.does(req.Kind) {
		return h.row.kindWhy(req.Kind)
	}
	if L := int64(h.layout.Local()); req.Kind == coll.AllReduce && req.Count%L != 0 {
		return fmt.Errorf("an all-reduce of %d elements does not split into %d pieces, one per rank of a host: %w (use nccl)", req.Count, L, errs.NotSupported)
	}
	if req.Kind != coll.AllGather && req.Op == coll.Avg && slices.Contains([]coll.DType{coll.Int32, coll.Int64, coll.Int8, coll.Uint8}, req.DType) {
		// Each level averages: a host's sum divided by L, then the hosts'
		// by H, which truncates twice where the flat average truncates once.
		return fmt.Errorf("an average of %v across hosts would round twice (within each host, then across hosts): %w (use nccl)", req.DType, errs.NotSupported)
	}
	if h.kids.Load() == nil {
		if c, err := h.g.x.capturing(h.g.b.ctx, req.Stream); err == nil && c {
			return fmt.Errorf("its child groups are created at the group's first hier call, and the stream is being captured: run one hier call before capturing: %w", errs.NotSupported)
		}
	}
	return nil
}

func (h *hierPath) prepare(call) error { return nil }

// issue queues nothing: the child groups' calls go in finish, without runMu
// (NCCL calls may block while they enqueue).
func (h *hierPath) issue(call) error { return nil }

// finish makes the children at the group's first call, then queues the
// call's steps. A failure breaks the group (Run) and its children: the
// call was published, and the peers go on with it.
func (h *hierPath) finish(ctx context.Context, c call) (coll.Algo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kids, err := h.children(ctx)
	if err != nil {
		return "", err
	}
	if err := h.steps(ctx, kids, c.req); err != nil {
		// A child that failed before it published its step, or never
		// got to it, is not broken by that: breaking it tells its peers
		// on this host, which wait for this rank's step, at once.
		kids.breakWith(err)
		return "", err
	}
	return "", nil
}

// steps queues req's schedule on the children. The caller holds mu.
func (h *hierPath) steps(ctx context.Context, kids *hierKids, req backend.Request) error {
	g := h.g
	unit := int64(req.DType.Size())
	chunk := req.Count * unit
	steps, err := h.layout.Build(req.Kind, g.Me, chunk, unit, req.InPlace)
	if err != nil {
		return err
	}
	var scratch uint64
	if n := h.layout.ScratchBytes(req.Kind, chunk); n > 0 {
		if scratch, err = g.x.scratch(g.b.ctx, req.Stream, n); err != nil {
			return fmt.Errorf("hier: %d bytes of scratch: %w", n, err)
		}
		defer g.x.release(g.b.ctx, req.Stream, scratch) // in stream order, after the last step
	}
	// The steps are made whatever ctx says, as the call is (Run): the
	// peers' children make theirs.
	ctx = context.WithoutCancel(ctx)
	for i, st := range steps {
		if err := h.step(ctx, kids, req, st, scratch); err != nil {
			// Earlier steps are queued and the peers go on.
			return fmt.Errorf("hier step %d (%v): %w", i, st, err)
		}
	}
	return nil
}

// step queues st: a copy on the call's stream, or a collective of the
// child group it names (auto chooses its path).
func (h *hierPath) step(ctx context.Context, kids *hierKids, req backend.Request, st hier.Step, scratch uint64) error {
	g := h.g
	at := func(r hier.Ref) (uint64, backend.Sym) {
		switch r.Buf {
		case hier.In:
			s := req.InSym
			s.Off += r.Off
			return req.In.Ptr + uint64(r.Off), s
		case hier.Out:
			s := req.OutSym
			s.Off += r.Off
			return req.Out.Ptr + uint64(r.Off), s
		}
		return scratch + uint64(r.Off), backend.Sym{}
	}
	in, inSym := at(st.In)
	out, outSym := at(st.Out)
	kind, ok := st.Kind.Coll()
	if !ok {
		g.runMu.Lock()
		defer g.runMu.Unlock()
		p := g.newProgram()
		p.Copy(req.Stream, out, in, st.Bytes)
		return g.x.program(p)
	}
	child := kids.host
	if st.Kind.Cross() {
		child = kids.cross
	}
	cr := backend.Request{Kind: kind, DType: req.DType, Op: req.Op, Count: st.Bytes / int64(req.DType.Size()),
		In: coll.Span{Ptr: in}, Out: coll.Span{Ptr: out}, InSym: inSym, OutSym: outSym, Algo: coll.AlgoAuto, Stream: req.Stream}
	cr = cr.Shaped(len(child.Ranks), child.Me)
	var flags uint64
	if cr.InPlace {
		flags = agree.InPlace
	}
	// No buffer locations: a step's buffer may sit at a rank's own slot
	// (an in-place call's input), where members differ by construction;
	// the group compared the call's locations already.
	cr.Record = agree.CallRecord(kind, req.DType, req.Op, 0, cr.Count, flags, 0, 0)
	_, err := child.Run(ctx, cr)
	return err
}

// children returns the child groups, creating them at the first call
// (collective: every rank of the group makes its first hier call alike)
// with the group's segments registered. The caller holds mu.
func (h *hierPath) children(ctx context.Context) (*hierKids, error) {
	if k := h.kids.Load(); k != nil {
		return k, nil
	}
	g, l := h.g, h.layout
	ranksOf := func(qs []int) []int {
		rs := make([]int, len(qs))
		for i, q := range qs {
			rs[i] = g.Ranks[q]
		}
		return rs
	}
	hostIdx, local := l.Host[g.Me], l.LocalIndex(g.Me)
	ctx, made := h.making(ctx)
	defer made()
	child := func(name string, qs []int) (*Group, error) {
		c, err := newGroup(ctx, g.b, backend.GroupConfig{Name: name, Ranks: ranksOf(qs), Rank: g.Ranks[g.Me],
			Store: g.Store, FDs: g.FDs, Timeout: g.Timeout}, g.gen)
		if gone := g.watch.err(); err != nil && gone != nil { // stopped by the abort: its reason, not the cancellation
			return nil, fmt.Errorf("%w (while making %s)", gone, name)
		}
		if err != nil {
			return nil, err
		}
		for _, seg := range h.segs {
			if err := c.Register(ctx, seg); err != nil {
				c.Close()
				return nil, err
			}
		}
		return c, nil
	}
	host, err := child(fmt.Sprintf("%s/hier-host%d", g.GroupName, hostIdx), l.HostRanks(hostIdx))
	if err != nil {
		return nil, fmt.Errorf("hier: the host's child group: %w", err)
	}
	cross, err := child(fmt.Sprintf("%s/hier-local%d", g.GroupName, local), l.Cross(local))
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("hier: the local index's child group: %w", err)
	}
	k := &hierKids{host: host, cross: cross}
	h.kids.Store(k)
	g.b.mu.Lock() // Synchronize reports their aborts and faults; Close closes them after the group (again: a no-op)
	g.b.groups = append(g.b.groups, host, cross)
	g.b.mu.Unlock()
	if err := g.watch.err(); err != nil { // aborted while they were made
		k.abort(err)
	}
	return k, nil
}

// making is the context the children are made under, cancelled with the
// group's abort (stop), also one that came before; done ends it.
func (h *hierPath) making(ctx context.Context) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	h.stopMaking.Store(&cancel)
	if err := h.g.watch.err(); err != nil { // aborted before stop could see cancel
		cancel(err)
	}
	return ctx, func() {
		h.stopMaking.Store(nil)
		cancel(nil)
	}
}

// stop ends a creation of the children in progress with err.
func (h *hierPath) stop(err error) {
	if cancel := h.stopMaking.Load(); cancel != nil {
		(*cancel)(err)
	}
}

// register and deregister keep the children's segments the group's.
// register registers seg with both children, or with neither: where the
// cross child fails, the host child deregisters it again.
func (h *hierPath) register(ctx context.Context, seg pool.Segment) error {
	if h.layout == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.kids.Load(); k != nil {
		if err := k.host.Register(ctx, seg); err != nil {
			return err
		}
		if err := k.cross.Register(ctx, seg); err != nil {
			return errors.Join(err, k.host.Deregister(ctx, seg))
		}
	}
	h.segs = append(h.segs, seg)
	return nil
}

// deregister deregisters seg from the children that have it (a child whose
// work was still in flight kept it: a later try finishes), and forgets it
// once neither has it.
func (h *hierPath) deregister(ctx context.Context, seg pool.Segment) error {
	if h.layout == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if k := h.kids.Load(); k != nil {
		var errs []error
		for _, c := range []*Group{k.host, k.cross} {
			if _, ok := c.peers.segs.Get(seg.ID); ok {
				errs = append(errs, c.Deregister(ctx, seg))
			}
		}
		if err = errors.Join(errs...); errors.Is(err, errWorkInFlight) {
			return err
		}
	}
	for i, s := range h.segs {
		if s.ID == seg.ID {
			h.segs = append(h.segs[:i], h.segs[i+1:]...)
			break
		}
	}
	return err
}

// close closes the children (collective, in the same order on every rank).
func (h *hierPath) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := h.kids.Swap(nil); k != nil {
		return errors.Join(k.host.Close(), k.cross.Close())
	}
	return nil
}

// leave tells the children's peers that this rank is closing.
func (h *hierPath) leave() {
	if k := h.kids.Load(); k != nil {
		k.host.Leave()
		k.cross.Leave()
	}
}

// breakWith breaks both children by err (a hier call that failed part-way).
func (k *hierKids) breakWith(err error) {
	for _, c := range []*Group{k.host, k.cross} {
		c.runMu.Lock()
		c.breakWith(err)
		c.runMu.Unlock()
	}
}

// abort stops the children as the group's abort stops the group: their
// later calls fail with err and their NCCL communicators are aborted.
func (k *hierKids) abort(err error) {
	for _, c := range []*Group{k.host, k.cross} {
		c.abortGroup(err, []*bnccl.Comm{c.nccl.comm, c.nccl.plain})
	}
}
