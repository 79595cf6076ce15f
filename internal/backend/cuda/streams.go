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
	for _, f := range g.fences {
		if f.stream == s {
			p.Fence(s, f.ev.Handle())
			return nil
		}
	}
	ev, err := cudadrv.NewEvent(g.b.ctx, false)
	if err != nil {
		return fmt.Errorf("fence for stream %#x: %w", s, err)
	}
	g.fences = append(g.fences, streamFence{stream: s, ev: ev})
	p.Fence(s, ev.Handle())
	return nil
}

// streamFence is the group's fence event on one caller stream.
type streamFence struct {
	stream uint64
	ev     *cudadrv.Event
}
