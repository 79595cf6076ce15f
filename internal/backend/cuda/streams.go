package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/native/cudadrv"
)

// streams is a group's own streams and events (the side streams that copies
// spread over, their fork and join events, the handshake's stream) and what
// quiesce waits on. The group's runMu guards it; the backend (its context
// and own stream) is the group's, passed in rather than kept twice.
type streams struct {
	side    []*cudadrv.Stream
	fork    *cudadrv.Event // local-copy fork
	forkX   *cudadrv.Event // transfer fork (after the ready wait)
	joins   []*cudadrv.Event
	last    *cudadrv.Event    // fence recorded by quiesce
	check   *cudadrv.Stream   // where the handshake runs beside a copy-engine or NCCL call (handshake.go)
	checkEv [2]*cudadrv.Event // its fork and join (hs holds their handles)
	usedOwn bool              // collectives ran on the backend's stream since the last quiesce
	fences  []streamFence     // fence events on callers' streams (track)
	h       handles           // raw handles of side, joins, fork, forkX, last, order
	order   *cudadrv.Event    // marks the backend's stream where a call moves off it (follow)
	prev    uint64            // the stream of the group's last call outside graph capture (hasPrev)
	hasPrev bool
	moveTo  uint64 // the stream follow ordered the call being issued on (moving; followed commits it)
	moving  bool
}

// handles are the raw stream and event handles the issue path uses.
type handles struct {
	side, joins              []uint64
	fork, forkX, last, order uint64
}

// create creates nside side streams with their join events, the forks,
// quiesce's fence, then the handshake's stream and events.
func (st *streams) create(c *cudadrv.Context, nside int) error {
	for i := 0; i < nside; i++ {
		s, err := cudadrv.NewStream(c, 0)
		if err != nil {
			return err
		}
		st.side = append(st.side, s)
		e, err := cudadrv.NewEvent(c, false)
		if err != nil {
			return err
		}
		st.joins = append(st.joins, e)
	}
	var err error
	if st.fork, err = cudadrv.NewEvent(c, false); err != nil {
		return err
	}
	if st.forkX, err = cudadrv.NewEvent(c, false); err != nil {
		return err
	}
	if st.last, err = cudadrv.NewEvent(c, false); err != nil {
		return err
	}
	if st.order, err = cudadrv.NewEvent(c, false); err != nil {
		return err
	}
	if st.check, err = cudadrv.NewStream(c, 0); err != nil {
		return err
	}
	for i := range st.checkEv {
		if st.checkEv[i], err = cudadrv.NewEvent(c, false); err != nil {
			return err
		}
	}
	for i := range st.side {
		st.h.side = append(st.h.side, st.side[i].Handle())
		st.h.joins = append(st.h.joins, st.joins[i].Handle())
	}
	st.h.fork, st.h.forkX, st.h.last, st.h.order = st.fork.Handle(), st.forkX.Handle(), st.last.Handle(), st.order.Handle()
	return nil
}

// destroyStreams destroys the streams created, appending each failure to
// errs. Close destroys the events later (destroyEvents).
func (st *streams) destroyStreams(errs []error) []error {
	for _, s := range append(st.side, st.check) {
		if s != nil {
			errs = append(errs, s.Destroy())
		}
	}
	return errs
}

// destroyEvents destroys the callers' streams' fences and the events
// created, appending each failure to errs.
func (st *streams) destroyEvents(errs []error) []error {
	for _, f := range st.fences {
		errs = append(errs, f.ev.Destroy())
	}
	for _, e := range append(st.joins, st.fork, st.forkX, st.last, st.order, st.checkEv[0], st.checkEv[1]) {
		if e != nil {
			errs = append(errs, e.Destroy())
		}
	}
	return errs
}

// localCopy adds x on side stream 0, forked from s, and returns the join
// event s must wait on once it no longer runs beside the copy.
func (st *streams) localCopy(p *cudadrv.Program, s uint64, x xfer) (join uint64) {
	side := st.h.side[0]
	p.Record(s, st.h.fork)
	p.WaitEvent(side, st.h.fork)
	p.Copy(side, x.dst, x.src, x.n)
	join = st.h.joins[0]
	p.Record(side, join)
	return join
}

// transfers issues xs spread over s and the side streams (fork and join by
// events): s first, then side[1:].
func (st *streams) transfers(p *cudadrv.Program, s uint64, xs []xfer) {
	nstreams := min(len(xs), len(st.h.side))
	if nstreams > 1 {
		p.Record(s, st.h.forkX)
		for i := 1; i < nstreams; i++ {
			p.WaitEvent(st.h.side[i], st.h.forkX)
		}
	}
	for i, x := range xs {
		on := s
		if j := i % nstreams; j > 0 {
			on = st.h.side[j]
		}
		p.Copy(on, x.dst, x.src, x.n)
	}
	for i := 1; i < nstreams; i++ {
		p.Record(st.h.side[i], st.h.joins[i])
		p.WaitEvent(s, st.h.joins[i])
	}
}

// track makes the collective just built into p (on stream s) visible to
// quiesce. The backend's own stream (own; c its context) is remembered and fenced later (no extra
// driver call). A caller's stream may be destroyed before the group is done
// (its handle then dangles), so a fence event of the group's is recorded on
// it at the end of the program instead — unless the stream is being
// captured (captured work runs when the graph is replayed, and the caller
// keeps the buffers alive while the graph exists): the Fence op decides
// that inside the program's one cgo call.
func (st *streams) track(p *cudadrv.Program, s uint64, own *cudadrv.Stream, c *cudadrv.Context) error {
	if s == own.Handle() {
		st.usedOwn = true
		return nil
	}
	ev, err := st.fence(s, c)
	if err != nil {
		return err
	}
	p.Fence(s, ev.Handle())
	return nil
}

// follow orders the call about to be issued on stream s (not yet
// published: a failure refuses it) after the group's previous call where
// that ran on another stream: it returns the event s must wait for (0:
// none) and, with record, that the caller records it on the backend's
// stream first. A caller's stream is marked by its fence event, recorded
// at the end of each call (track); the backend's stream is marked when a
// call moves off it. So a group's calls run on the GPU in the order they
// were made, also where a caller spreads them over streams (FSDP2's
// all-gather and reduce-scatter streams): two calls of one group at once,
// or in opposite orders on two ranks, would meet their peers' calls out of
// step (the kernels' in-band check, ce's signals and the gate count a
// group's calls in one order). An NCCL call with nothing of symmem's
// queued around it records no fence: the wait covers symmem's work before
// it. A previous stream whose fence quiesce dropped ran to its end:
// nothing to wait for. Captured calls are neither ordered nor followed: a
// graph runs when it is replayed, and the caller orders its replays.
// Nothing is asked of the driver where s is the previous stream. The
// caller holds runMu and calls followed once the call is queued.
func (st *streams) follow(s uint64, own *cudadrv.Stream, x executor, c *cudadrv.Context) (mark uint64, record bool, err error) {
	if st.stays(s) {
		return 0, false, nil
	}
	capt, err := x.capturing(c, s)
	if err != nil {
		return 0, false, fmt.Errorf("stream %#x: asking whether it is being captured: %w", s, err)
	}
	if capt {
		return 0, false, nil
	}
	st.moveTo, st.moving = s, true
	switch {
	case !st.hasPrev:
		return 0, false, nil
	case st.prev == own.Handle():
		return st.h.order, true, nil
	}
	if ev := st.fenceOf(st.prev); ev != nil {
		return ev.Handle(), false, nil
	}
	return 0, false, nil
}

// stays reports whether a call on stream s stays on the group's previous
// call's stream: follow has nothing to do (small enough to inline, so the
// common case costs no call).
func (st *streams) stays(s uint64) bool {
	st.moving = false
	return st.hasPrev && st.prev == s
}

// followed notes that the call follow ordered is queued: its stream is
// the one the next call on another stream waits for.
func (st *streams) followed() {
	if st.moving {
		st.prev, st.hasPrev, st.moving = st.moveTo, true, false
	}
}

// fenceFor creates the group's fence event on stream s where it is a
// caller's stream that has none yet: Run does so before it publishes a
// call, so that track does not fail after (a quiesce between an NCCL
// call's issue and its handshake's may drop it again: track then makes
// it anew).
func (st *streams) fenceFor(s uint64, own *cudadrv.Stream, c *cudadrv.Context) error {
	if s == own.Handle() {
		return nil
	}
	_, err := st.fence(s, c)
	return err
}

// fence is the group's fence event on caller stream s, created at the
// stream's first call since the last quiesce.
func (st *streams) fence(s uint64, c *cudadrv.Context) (*cudadrv.Event, error) {
	if ev := st.fenceOf(s); ev != nil {
		return ev, nil
	}
	ev, err := cudadrv.NewEvent(c, false)
	if err != nil {
		return nil, fmt.Errorf("fence for stream %#x: %w", s, err)
	}
	st.fences = append(st.fences, streamFence{stream: s, ev: ev})
	return ev, nil
}

// fenceOf is the group's fence event on caller stream s (nil: none since
// the last quiesce).
func (st *streams) fenceOf(s uint64) *cudadrv.Event {
	for _, f := range st.fences {
		if f.stream == s {
			return f.ev
		}
	}
	return nil
}

// quiesce waits (bounded by timeout) until every collective issued so far
// (outside graph capture) finished: it fences own, the backend's stream,
// and waits for the fence events recorded on callers' streams (track).
func (st *streams) quiesce(ctx context.Context, own *cudadrv.Stream, timeout time.Duration) error {
	if st.last == nil {
		return nil
	}
	if st.usedOwn {
		if err := st.last.Record(own); err != nil {
			return err
		}
		if err := st.last.Wait(ctx, timeout); err != nil {
			return err
		}
		st.usedOwn = false
	}
	// Fences of callers' streams are waited on, then dropped: a stream the
	// caller destroyed leaves nothing behind after the next quiesce.
	for len(st.fences) > 0 {
		f := st.fences[len(st.fences)-1]
		if err := f.ev.Wait(ctx, timeout); err != nil {
			return err
		}
		f.ev.Destroy()
		st.fences = st.fences[:len(st.fences)-1]
	}
	// Side streams are joined into the caller's stream by events, so they
	// are idle once it is.
	return nil
}

// streamFence is the group's fence event on one caller stream.
type streamFence struct {
	stream uint64
	ev     *cudadrv.Event
}
