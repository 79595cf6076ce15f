package cuda

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/backend"
	"github.com/symmem/symmem/internal/native/cuda"
)

// maxGraphs bounds the cache of captured all-gathers per group.
const maxGraphs = 64

// graphKey identifies one all-gather geometry: the graph bakes in every
// address, so any change needs another graph.
type graphKey struct {
	in, out       uint64
	count         int64
	esize         int
	inSym, outSym backend.Sym
	tune          ceTune
}

// graphFor returns the two captured graphs (phase 1 and 2) for req,
// capturing them on first use. The caller holds runMu.
func (g *Group) graphFor(req backend.Request) (*[2]*cuda.Graph, error) {
	k := graphKey{in: req.In.Ptr, out: req.Out.Ptr, count: req.Count, esize: req.DType.Size(), inSym: req.InSym, outSym: req.OutSym, tune: g.tune}
	if x, ok := g.graphs[k]; ok {
		return x, nil
	}
	if !cuda.HaveGraphs() {
		return nil, fmt.Errorf("copy-engine graphs: the driver lacks stream capture: %w", ErrNotSupported)
	}
	if len(g.graphs) >= maxGraphs {
		if err := g.dropGraphsLocked(); err != nil {
			return nil, err
		}
	}
	var x [2]*cuda.Graph
	p := cuda.NewProgram(64)
	for i := range x {
		if err := g.buildAllGather(p, req, g.capStream.Handle(), uint32(i+1)); err != nil {
			return nil, err
		}
		// Capture from the first op after SetContext (the capture sets it).
		gr, err := cuda.Capture(g.b.ctx, g.capStream, p)
		if err != nil {
			if x[0] != nil {
				x[0].Destroy()
			}
			return nil, err
		}
		x[i] = gr
	}
	if g.graphs == nil {
		g.graphs = map[graphKey]*[2]*cuda.Graph{}
	}
	g.graphs[k] = &x
	return &x, nil
}

// dropGraphsLocked waits for the group's work and destroys every captured
// graph (they may name unmapped memory). The caller holds runMu.
func (g *Group) dropGraphsLocked() error {
	if len(g.graphs) == 0 {
		return nil
	}
	for _, s := range g.used {
		st := cuda.WrapStream(g.b.ctx, s)
		if err := g.last.Record(st); err != nil {
			return err
		}
		if err := g.last.Wait(context.Background(), g.timeout); err != nil {
			return err
		}
	}
	for k, x := range g.graphs {
		for _, gr := range x {
			gr.Destroy()
		}
		delete(g.graphs, k)
	}
	return nil
}
