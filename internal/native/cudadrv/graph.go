package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Graph is an instantiated CUDA graph (CUgraphExec).
type Graph struct {
	ctx *Context
	h   unsafe.Pointer
}

// Handle is the raw CUgraphExec.
func (g *Graph) Handle() uint64 { return uint64(uintptr(g.h)) }

// Destroy frees the executable graph.
func (g *Graph) Destroy() error {
	return check("cuGraphExecDestroy", C.symc_graph_destroy(g.ctx.h, g.h))
}
