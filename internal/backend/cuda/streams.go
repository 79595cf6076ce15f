package cuda

import (
	"fmt"

	"github.com/symmem/symmem/internal/native/cudadrv"
)

// track makes the collective just built into p (on stream s) visible to
// quiesce. The backend's own stream is remembered and fenced later (no extra
// driver call). A caller's stream may be destroyed before the group is done
// (its handle then dangles), so a fence event of the group's is recorded on
// it at the end of the program instead — unless the stream is being
// captured (captured work runs when the graph is replayed, and the caller
// keeps the buffers alive while the graph exists): the Fence op decides
// that inside the program's one cgo call.
func (g *Group) track(p *cudadrv.Program, s uint64) error {
	if s == g.b.stream.Handle() {
		g.usedOwn = true
		return nil
	}
	ev, err := g.fence(s)
	if err != nil {
		return err
	}
	p.Fence(s, ev.Handle())
	return nil
}

// fenceFor creates the group's fence event on stream s where it is a
// caller's stream that has none yet: Run does so before it publishes a
// call, so that track does not fail after (a quiesce between an NCCL
// call's issue and its handshake's may drop it again: track then makes
// it anew).
func (g *Group) fenceFor(s uint64) error {
	if s == g.b.stream.Handle() {
		return nil
	}
	_, err := g.fence(s)
	return err
}

// fence is the group's fence event on caller stream s, created at the
// stream's first call since the last quiesce.
func (g *Group) fence(s uint64) (*cudadrv.Event, error) {
	for _, f := range g.fences {
		if f.stream == s {
			return f.ev, nil
		}
	}
	ev, err := cudadrv.NewEvent(g.b.ctx, false)
	if err != nil {
		return nil, fmt.Errorf("fence for stream %#x: %w", s, err)
	}
	g.fences = append(g.fences, streamFence{stream: s, ev: ev})
	return ev, nil
}

// streamFence is the group's fence event on one caller stream.
type streamFence struct {
	stream uint64
	ev     *cudadrv.Event
}
