package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// HaveGraphs reports whether stream capture and graph launch are available.
func HaveGraphs() bool { return Load() == nil && C.symc_have_graphs() != 0 }

// Graph is an instantiated CUDA graph (CUgraphExec).
type Graph struct {
	ctx *Context
	h   unsafe.Pointer
}

// Capture records p's ops on stream s (a stream of ctx that is not in use)
// into a graph and instantiates it. Values in p (signal epochs, addresses)
// are baked into the graph.
func Capture(ctx *Context, s *Stream, p *Program) (*Graph, error) {
	if p.batch >= 0 {
		return nil, fmt.Errorf("cuda: capture of a program with an open batch")
	}
	if len(p.ops) == 0 {
		return nil, fmt.Errorf("cuda: capture of an empty program")
	}
	var exec unsafe.Pointer
	var failed C.int
	r := C.symc_capture(ctx.h, s.h, (*C.symc_op)(unsafe.Pointer(&p.ops[0])), C.int(len(p.ops)), &exec, &failed)
	if r != 0 {
		what := "cuStreamBeginCapture/EndCapture/cuGraphInstantiate"
		if i := int(failed); i >= 0 && i < len(p.ops) {
			what = fmt.Sprintf("op %d (%s) during capture", i, opNames[p.ops[i].Kind])
		}
		return nil, fmt.Errorf("cuda: capturing a graph: %s: %w", what, &Error{Call: "capture", Code: int(r), Name: errName(int(r))})
	}
	return &Graph{ctx: ctx, h: exec}, nil
}

// Handle is the raw CUgraphExec.
func (g *Graph) Handle() uint64 { return uint64(uintptr(g.h)) }

// Destroy frees the executable graph.
func (g *Graph) Destroy() error {
	return check("cuGraphExecDestroy", C.symc_graph_destroy(g.ctx.h, g.h))
}

// LaunchGraph enqueues an instantiated graph on stream.
func (p *Program) LaunchGraph(stream, graph uint64) {
	p.ops = append(p.ops, Op{Kind: OpGraph, Stream: stream, A: graph})
}
