//go:build cgo

package worldtarget

import (
	"errors"
	"fmt"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

var _ bench.Grapher = (*Target)(nil)

// graphWait bounds the wait for the replays enqueued on a graph's stream.
const graphWait = 5 * time.Minute

// Capture implements bench.Grapher on the cuda backend: it captures calls
// identical calls, each enqueued on a stream of its own with
// symmem.WithStream, into one CUDA graph (docs/gpu.md: captured kernel and
// copy-engine collectives carry no host-chosen values, so replays stay
// correct; NCCL captures its own). The stream belongs to the backend's
// device (World.Device).
func (t *Target) Capture(calls int, k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (bench.Graph, error) {
	// Refusals wrap ErrNotSupported: every rank refuses alike, and the
	// sweep reports a refused row and goes on (bench's graphed).
	if k == coll.Broadcast && in != out {
		return nil, fmt.Errorf("out-of-place broadcast is a local copy plus a broadcast here and is not captured: use --inplace only: %w", symmem.ErrNotSupported)
	}
	if be := t.w.Backend(); be != "cuda" {
		return nil, fmt.Errorf("CUDA graphs need the cuda backend, this job runs %s: %w", be, symmem.ErrNotSupported)
	}
	if calls < 1 {
		return nil, fmt.Errorf("capture of %d calls: need at least 1", calls)
	}
	ctx, err := cudadrv.Retain(t.w.Device())
	if err != nil {
		return nil, err
	}
	s, err := cudadrv.NewStream(ctx, 0)
	if err != nil {
		ctx.Release()
		return nil, err
	}
	// Earlier calls on the backend's stream must be done before the
	// replays on ours touch the same buffers.
	if err := t.w.Synchronize(t.ctx); err != nil {
		s.Destroy()
		ctx.Release()
		return nil, err
	}
	if err := cudadrv.BeginCapture(ctx, s); err != nil {
		s.Destroy()
		ctx.Release()
		return nil, err
	}
	o := []symmem.CallOption{symmem.WithAlgo(algo), symmem.WithStream(s.Handle())}
	var runErr error
	for i := 0; i < calls && runErr == nil; i++ {
		switch k {
		case coll.AllGather:
			_, runErr = t.g.AllGather(t.ctx, out, in, dt, o...)
		case coll.ReduceScatter:
			_, runErr = t.g.ReduceScatter(t.ctx, out, in, dt, op, o...)
		case coll.AllReduce:
			_, runErr = t.g.AllReduce(t.ctx, out, in, dt, op, o...)
		case coll.Broadcast:
			_, runErr = t.g.Broadcast(t.ctx, out, root, dt, o...)
		case coll.AllToAll:
			_, runErr = t.g.AllToAll(t.ctx, out, in, dt, o...)
		default:
			runErr = fmt.Errorf("bench: unknown op %v", k)
		}
	}
	g, endErr := cudadrv.EndCapture(ctx, s)
	if err := errors.Join(runErr, endErr); err != nil {
		if g != nil {
			g.Destroy()
		}
		s.Destroy()
		ctx.Release()
		return nil, fmt.Errorf("capturing %v (algo %s): %w", k, algo, err)
	}
	return &graph{t: t, ctx: ctx, s: s, g: g}, nil
}

// graph is a captured sequence of calls and the stream it replays on.
type graph struct {
	t   *Target
	ctx *cudadrv.Context
	s   *cudadrv.Stream
	g   *cudadrv.Graph
}

func (g *graph) Replay() error { return g.g.Launch(g.s) }

func (g *graph) Wait() error { return g.s.Wait(g.t.ctx, graphWait) }

// Close waits for the replays, then frees the graph and the stream and
// releases the context reference.
func (g *graph) Close() error {
	err := g.Wait()
	return errors.Join(err, g.g.Destroy(), g.s.Destroy(), g.ctx.Release())
}
