package shm

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
)

// cpuAlgos: the CPU backend has one path, direct, for every op.
var cpuAlgos = map[coll.Kind][]coll.Algo{
	coll.AllGather:     {coll.AlgoDirect},
	coll.ReduceScatter: {coll.AlgoDirect},
	coll.AllReduce:     {coll.AlgoDirect},
	coll.Broadcast:     {coll.AlgoDirect},
	coll.AllToAll:      {coll.AlgoDirect},
}

// Capabilities reports host memory (no Device), the direct path only, and
// calls compared in-band (agree.CallsInBand: on the signal pads).
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Algos: cpuAlgos, Calls: agree.CallsInBand}
}

// Describe reports the backend's segments and groups (`symmem doctor`).
func (b *Backend) Describe() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("cpu: memfd shared memory, %d segments mapped, %d groups; ranks signal through shared words (atomics + futex)\n",
		b.prov.Len(), len(b.groups))
}

// Explain reports the direct path req would take. For ordinary memory
// (Sym.OK false) it says only how the direct path moves the data: the user
// API explains the staging around it.
func (g *Group) Explain(req backend.Request) coll.Path {
	if !req.OutSym.OK {
		return coll.Path{Algo: coll.AlgoDirect, Reason: directHow(req, len(g.Ranks))}
	}
	return coll.Path{Algo: coll.AlgoDirect, Reason: fmt.Sprintf(
		"symmetric buffers (cpu backend, peers mapped): %s", directHow(req, len(g.Ranks)))}
}

func directHow(req backend.Request, n int) string {
	switch req.Kind {
	case coll.AllGather:
		return "each rank copies every peer's input into its output"
	case coll.ReduceScatter:
		return "each rank reduces its chunk from every peer's input"
	case coll.AllReduce:
		if oneShot(n, req.Count*int64(req.DType.Size()), req.InPlace) {
			return "one-shot (small tensor): every rank reduces the whole tensor from every peer"
		}
		return "two-shot: each rank reduces 1/n of the tensor from every peer, then gathers the reduced slices"
	case coll.Broadcast:
		return "every rank copies the root's buffer"
	case coll.AllToAll:
		if req.A2A.Kind() == backend.SplitsEqual {
			return "each rank copies its block of every peer's input into its output"
		}
		return "each rank reads every rank's split counts, then copies its block of every peer's input into its output"
	}
	return "unknown op"
}
