package symmem

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/doctor"
	"github.com/symmem/symmem/internal/backend"
)

// emptyCall is the reason of a call with no element per rank.
const emptyCall = "empty call: nothing to move"

// Explain says which path a call of kind k moving bytes (the full gathered /
// pre-reduction tensor; all-to-all: one rank's input, equal blocks) would
// take on the world group, and why, without running anything.
func (w *World) Explain(k coll.Kind, bytes int64, symmetric bool) coll.Path {
	return w.World().Explain(k, bytes, symmetric)
}

// Explain is World.Explain for this group. The backend explains its own
// paths; on host memory the group's stager adds the staging of ordinary
// memory.
func (g *Group) Explain(k coll.Kind, bytes int64, symmetric bool) coll.Path {
	if !g.IsMember() || g.closed.Load() {
		return coll.Path{Reason: fmt.Sprintf("rank %d cannot run calls on group %q (not a member, or closed)", g.w.Rank(), g.name)}
	}
	req := g.explainRequest(k, bytes, symmetric)
	if req.Count == 0 { // as the call: no element per rank, nothing to move, whatever the memory
		return coll.Path{Algo: coll.AlgoDirect, Reason: emptyCall}
	}
	return g.bg.Explain(req)
}

// Doctor collects a doctor.Report (local, not collective): this rank's
// state and the path each of doctor.Kinds × doctor.Sizes would take on the
// world group for symmetric and ordinary buffers.
func (w *World) Doctor() doctor.Report {
	r := doctor.Report{Backend: w.Backend(), Why: w.why, Detail: w.be.Describe(), Rank: w.env.Rank, Size: w.env.WorldSize, LocalRank: w.env.LocalRank,
		LocalSize: w.env.LocalWorldSize, JobID: w.env.JobID, Timeout: w.opts.Timeout, Checked: w.opts.Checked,
		Staging: max(w.opts.StagingBytes, 0), Pool: w.pool.Stats(), Machine: w.machine, AutoTable: w.auto}
	for _, g := range w.Groups() {
		r.Groups = append(r.Groups, doctor.Group{Name: g.name, Ranks: g.Ranks(), Member: g.IsMember(), Rank: g.rank})
	}
	for _, k := range doctor.Kinds {
		for _, b := range doctor.Sizes {
			for _, sym := range []bool{true, false} {
				r.Paths = append(r.Paths, doctor.Path{Kind: k, Bytes: b, Symmetric: sym, Path: w.Explain(k, b, sym)})
			}
		}
	}
	return r
}

// explainRequest is a representative bf16 request of bytes in total for a
// backend that chooses by size and symmetry. Symmetric spans are marked as
// registered; nothing is dereferenced.
func (g *Group) explainRequest(k coll.Kind, bytes int64, symmetric bool) backend.Request {
	n := int64(g.Size())
	dt := coll.BFloat16
	count := bytes / int64(dt.Size())
	if k == coll.AllGather || k == coll.ReduceScatter || k == coll.AllToAll {
		count /= n
	}
	sym := backend.Sym{OK: symmetric}
	return backend.Request{Kind: k, DType: dt, Op: coll.Sum, Count: count, Algo: coll.AlgoAuto,
		In: coll.Span{Ptr: 1 << 40}, Out: coll.Span{Ptr: 1 << 41}, InSym: sym, OutSym: sym}.Shaped(int(n), max(g.rank, 0))
}
