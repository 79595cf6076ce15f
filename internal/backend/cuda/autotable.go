package cuda

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/tune"
)

//go:generate go run ../../tune/gen -dir ../../../results/auto -pkg cuda -var builtinTable -o autotable_builtin.go

// auto's table says which path to start from per op, dtype class, rank
// count, placement and size (package tune: its format, lookup and how it
// is built). builtinTable (autotable_builtin.go) is generated from the
// measurement files in results/auto by internal/tune/gen; a table the user
// points to (Options.AutoTable: symmem.Options.GPU.AutoTable or
// SYMMEM_AUTO_TABLE, written by `symmem tune`) is asked first, and where
// it has no row for a call the built-in one answers, and where neither
// does, plain NCCL. The table only says where auto starts: the fallback
// orders and the conditions below stay code and apply after it.
//
// The built-in rows come from `symmem tune` on 2 and 4 GPUs (bfloat16, 1
// KiB-1 GiB); what tune does not measure (reductions of other types,
// broadcast, 5+ ranks) still comes from the transcription of the
// hand-written rules it replaced (a seed table in results/auto). The tests
// of the rules after the table start from that transcription (goldenTable),
// so they do not change with each measurement; TestAutoMeetsMeasurements
// checks the table against the measurements.

// autoPick is the path auto starts from for a call of op k on dt moving
// total bytes on n ranks, captured into a CUDA graph or not: user's table
// (nil: none) first, then the built-in one, then plain NCCL.
func autoPick(user *tune.Table, k coll.Kind, dt coll.DType, total int64, n int, inPlace, graph bool) coll.Algo {
	if a, ok := user.Pick(k, dt, n, inPlace, graph, total); ok {
		return a
	}
	if a, ok := builtinTable.Pick(k, dt, n, inPlace, graph, total); ok {
		return a
	}
	return coll.AlgoNCCL
}

// AutoTable is the table auto reads before the built-in one (nil: none)
// and the built-in one.
func (b *Backend) AutoTable() (user, builtin *tune.Table) { return b.table, builtinTable }

// captured reports whether stream s is being captured into a CUDA graph
// (an error to ask counts as not captured: the eager rows answer). auto
// asks only where the tables' graph rows answer otherwise than their eager
// rows, which needs a table with graph rows.
func (p *pathSet) captured(s uint64) bool {
	c, err := p.g.x.capturing(p.g.b.ctx, s)
	return err == nil && c
}

// CheckAutoTable reports why this backend refuses t on machine m: a path
// auto cannot start from (it has no fallback order: the CPU's direct), a
// table measured elsewhere: another backend, another GPU model, or
// another NCCL release series (major.minor: NCCL's major has been 2 since
// 2018; its minor releases change algorithms and thresholds), or a table
// that does not say where it was measured: no backend, no GPU, or no NCCL
// version where this rank loaded NCCL. The link, the GPU count and the
// driver are not compared: doctor shows them. The error wraps
// errs.Invalid.
func CheckAutoTable(t *tune.Table, m tune.Machine) error {
	tm := t.Machine
	if tm.Backend != "" && tm.Backend != "cuda" {
		return fmt.Errorf("auto table measured on the %q backend, not cuda: re-run `symmem tune --backend cuda` on this machine: %w", tm.Backend, errs.Invalid)
	}
	for _, a := range t.Algos() {
		if r := pathRow(a); r == nil || r.fallback == nil {
			return fmt.Errorf("auto table: path %q is not one the GPU backend's auto can start from (%v): edit that row or re-run `symmem tune --backend cuda`: %w", a, autoStarts(), errs.Invalid)
		}
	}
	gpu := strings.TrimSpace(tm.GPU)
	switch {
	case gpu != "" && !strings.EqualFold(gpu, strings.TrimSpace(m.GPU)):
		return fmt.Errorf("auto table measured on %s, this rank has %s: re-run `symmem tune` here: %w", tm.GPU, m.GPU, errs.Invalid)
	case tm.NCCL != "" && m.NCCL != "" && ncclSeries(tm.NCCL) != ncclSeries(m.NCCL):
		return fmt.Errorf("auto table measured with NCCL %s, this rank loaded NCCL %s (another release series): re-run `symmem tune` here: %w",
			tm.NCCL, m.NCCL, errs.Invalid)
	}
	// A field left empty used to pass every comparison, so a hand-written
	// table naming no machine steered auto on any GPU. `symmem tune` (and
	// the built-in table's generator) always records the GPU, and NCCL's
	// version whenever NCCL loaded: only a table measured without NCCL may
	// lack it, and a rank without NCCL has no version to hold it to.
	var missing []string
	if tm.Backend == "" {
		missing = append(missing, "backend")
	}
	if gpu == "" {
		missing = append(missing, "GPU")
	}
	if tm.NCCL == "" && m.NCCL != "" {
		missing = append(missing, "NCCL version (this rank loaded NCCL "+m.NCCL+")")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("auto table names no %s: a table must say where it was measured (its \"machine\"), or auto would follow it on any machine: make one on this machine with `symmem tune -o FILE`: %w",
		joinAnd(missing), errs.Invalid)
}

// joinAnd is "a", "a and b" or "a, b and c", each but the first after "no ".
func joinAnd(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", no ") + " and no " + items[len(items)-1]
}

// ncclSeries is "2.28" of "2.28.9".
func ncclSeries(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// autoStarts lists the paths with a fallback order, sorted.
func autoStarts() []coll.Algo {
	var out []coll.Algo
	for i := range pathTable {
		if pathTable[i].fallback != nil {
			out = append(out, pathTable[i].algo)
		}
	}
	slices.Sort(out)
	return out
}

// auto is auto's choice for c, the one reader of the table and the
// fallback order: the table's path for c's op and size, then the turns of
// the paths in its order, step by step.
func (p *pathSet) auto(c *call) (path, coll.Algo, string, error) {
	g, req := p.g, &c.req
	total := req.In.Len // the full tensor: all-gather's output
	if req.Kind == coll.AllGather {
		total = req.Out.Len
	}
	f := autoFacts{p: p, c: c}
	start := autoPick(g.b.table, req.Kind, req.DType, total, len(g.Ranks), req.InPlace, false)
	// Asking the driver whether the stream is captured is a driver call on
	// an eager call's host path (about a microsecond, as much as a small
	// ll call), so auto asks only where the graph rows answer otherwise
	// than the eager ones.
	if gs := autoPick(g.b.table, req.Kind, req.DType, total, len(g.Ranks), req.InPlace, true); gs != start && p.captured(req.Stream) {
		start = gs
	}
	var order []autoStep // empty where the tables name no GPU path (CheckAutoTable refuses such a table)
	if r := pathRow(start); r != nil {
		order = r.order
	}
	for i := range order {
		s := &order[i]
		if !f.all(p, s) {
			continue
		}
		switch {
		case s.algo == coll.AlgoAuto:
			return nil, coll.AlgoAuto, "", f.noPath()
		case s.kindWhy != nil:
			return p.all[s.row], s.algo, s.kindWhy[req.Kind], nil
		}
		return p.all[s.row], s.algo, s.why, nil
	}
	panic("cuda: auto: every fallback order ends in NCCL's turn, whose last step always holds")
}

// autoFacts answers auto's conditions for one call.
type autoFacts struct {
	p *pathSet
	c *call
}

// all reports whether every condition of step s holds. p is f.p, passed
// apart: holds hands it to the step's path's serves, a func value, and f itself
// passed there would move the call f points to, which Run keeps on its
// stack, to the heap.
func (f *autoFacts) all(p *pathSet, s *autoStep) bool {
	for _, c := range s.when {
		if !f.holds(p, c, s) {
			return false
		}
	}
	return true
}

// holds is where auto's special rules are applied: NCCL windows' verdicts
// (ncclwindow.go: judgeWindow, on the call), element-mode reductions
// (reduceElementwise), no NCCL on groups without a communicator (NCCL not
// loaded or failed, or ranks sharing a GPU: setup), non-symmetric buffers.
func (f *autoFacts) holds(p *pathSet, c autoCond, s *autoStep) bool {
	g, req := p.g, &f.c.req
	usable := g.nccl.comm != nil && !g.nccl.unsafe(f.c) && (req.Kind != coll.AllToAll || ncclA2AWhy(g.b.nccl.lib, *req) == "")
	switch c {
	case ncclUsable:
		return usable
	case ncclUnusable:
		return !usable
	case noNCCL:
		return g.nccl.comm == nil
	case goodWindows:
		return f.c.win && f.c.verdict == windowGood
	case noWindows:
		return !f.c.win
	case poorWindows:
		return f.c.win && f.c.verdict != windowGood
	case notSymmetric:
		return !buffersSymmetric(*req)
	case symmetricBufs:
		return buffersSymmetric(*req)
	case elementwise:
		return reduceElementwise(*req)
	case oneShot:
		return req.Kind == coll.ReduceScatter || req.Count*int64(req.DType.Size()) <= oneShotMax(*req, len(g.Ranks))
	case allGather:
		return req.Kind == coll.AllGather
	case notAllGather:
		return req.Kind != coll.AllGather
	case allReduce:
		return req.Kind == coll.AllReduce
	case pathServes:
		return pathTable[s.row].serves(p, *req)
	case allToAll:
		return req.Kind == coll.AllToAll
	case deviceSplits:
		return req.Kind == coll.AllToAll && req.A2A.Kind() == backend.SplitsDevice
	case lcReady: // else lc would refuse: auto never does (errs.Refused)
		if p.lc.staging != nil {
			return true
		}
		capturing, err := g.x.capturing(g.b.ctx, req.Stream)
		return err == nil && !capturing
	case llSmall:
		return llRowOf(*req) <= llSmallRow
	case llBytesLarge:
		return llRowOf(*req) > llSmallRow && (req.In.Ptr|req.Out.Ptr)%llVec != 0
	}
	panic(fmt.Sprintf("cuda: auto: condition %d", c))
}

// noPath is the error of a call no path takes: NCCL unavailable, unsafe
// for its shape, or (all-to-all) without the calls it needs, and copy
// engines do not serve it; for split counts on the device, why the kernel
// (the one path that reads them) cannot take it.
func (f *autoFacts) noPath() error {
	p := f.p
	g := p.g
	if g.nccl.unsafe(f.c) {
		return ErrNCCLWindowWrong
	}
	if req := f.c.req; req.Kind == coll.AllToAll && req.A2A.Kind() == backend.SplitsDevice {
		if err := p.kernel.whyNot(f.c.req); err != nil { // the one path that reads them
			return fmt.Errorf("no GPU path: split counts on the device are read by symmem's all-to-all kernel alone: %w", err)
		}
	}
	if req := f.c.req; req.Kind == coll.AllToAll && g.nccl.comm != nil {
		return fmt.Errorf("no GPU path: %s and %s: %w", ncclA2AWhy(g.b.nccl.lib, req), p.ce.why(req), errs.NotSupported)
	}
	return fmt.Errorf("no GPU path: NCCL unavailable (%w) and %s: %w", g.nccl.unavailable(), p.ce.why(f.c.req), errs.NotSupported)
}

// reduceElementwise reports whether symmem's reduction kernel would run req
// in element mode on every rank (kernel.go: reduceUnit): a symmetric
// buffer's address, or a reduce-scatter's per-rank size (chunk r starts r
// sizes in), off a 16-byte boundary. Only facts alike on every rank count
// (symmetric buffers sit at the same pool offsets, in aligned segments):
// an ordinary output's alignment is this rank's own, and counting it made
// ranks of one call choose the kernel and NCCL (the gate then failed the
// group). Element mode is slower than plain NCCL, so auto leaves such
// calls to NCCL when the group has it.
func reduceElementwise(req backend.Request) bool {
	if req.Kind != coll.ReduceScatter && req.Kind != coll.AllReduce {
		return false
	}
	var addr uint64
	if req.InSym.OK {
		addr |= req.In.Ptr
	}
	if req.OutSym.OK {
		addr |= req.Out.Ptr
	}
	if req.Kind == coll.ReduceScatter {
		addr |= uint64(req.Count * int64(req.DType.Size()))
	}
	return addr%kernAlign != 0
}

// oneShotMax is the largest all-reduce (bytes per rank) auto gives to the
// one-shot kernel without NCCL: on 2 ranks out of place, up to where
// two-shot catches up. In place the one-shot
// kernel holds at most arMaxBytes; wider groups are not measured and read
// (n-1) inputs, so they switch at arMaxBytes too.
func oneShotMax(req backend.Request, n int) int64 {
	if n <= 2 && !req.InPlace {
		return 64 << 20
	}
	return arMaxBytes
}
