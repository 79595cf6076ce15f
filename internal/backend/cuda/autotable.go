package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// autoRow says which algorithm `auto` picks for one op below a size.
type autoRow struct {
	upTo        int64     // total bytes (nccl-tests "size": the gathered output for all-gather), inclusive
	algo        coll.Algo // preferred; falls back when it does not take the call (autoFallback)
	inPlaceOnly bool      // the row applies to in-place calls only (out-of-place ones read on)
}

// autoTable is the fastest path per op and size for 2 ranks, from `symmem
// bench` (bf16, through the launcher) on 2x H200 against NCCL 2.28.9
// (measured: results/gpu-kernel-2026-11-21.md). All-gather: symmem's kernel
// up to 16 MiB, except in place around 4 MiB, where NCCL's window kernel is
// faster; above 16 MiB the kernel and copy engines are close and copy
// engines use no SMs, so they take over. All-reduce: symmem's one-shot
// kernel up to 2 MiB (its limit), NCCL windows to 8 MiB. Reduce-scatter: the
// same kernel up to 4 MiB of input (2 MiB out per rank), windows to 8 MiB.
// Above, plain NCCL on the window-free communicator: NCCL's symmetric
// kernels are slower for large reductions (4x H200:
// results/gpu-scale-2026-11-21.md).
var autoTable = map[coll.Kind][]autoRow{
	coll.AllGather: {{upTo: 2 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow, inPlaceOnly: true},
		{upTo: 16 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
	coll.ReduceScatter: {{upTo: 4 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.AllReduce:     {{upTo: 2 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.Broadcast:     {{upTo: 1 << 62, algo: coll.AlgoNCCL}},
}

// autoTableWide replaces rows for groups of more than 2 ranks: on 4x H200
// the all-gather kernel matches or beats NCCL windows up to 64 MiB and copy
// engines win from 256 MiB (measured: results/gpu-kernel-2026-11-21.md, 4
// ranks; results/gpu-scale-2026-11-21.md).
var autoTableWide = map[coll.Kind][]autoRow{
	coll.AllGather: {{upTo: 64 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
	// The all-reduce kernel reads (n-1) whole inputs over NVLink; it (and
	// its reduce-scatter) is measured on 2 ranks only, so wider groups keep
	// NCCL.
	coll.AllReduce:     {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.ReduceScatter: {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
}

// autoPick is the table's path for op k of total bytes on n ranks.
func autoPick(k coll.Kind, total int64, n int, inPlace bool) coll.Algo {
	rows := autoTable[k]
	if w, ok := autoTableWide[k]; ok && n > 2 {
		rows = w
	}
	for _, r := range rows {
		if total <= r.upTo && (inPlace || !r.inPlaceOnly) {
			return r.algo
		}
	}
	return coll.AlgoNCCL
}

// The fallback order: where the table's path does not take the call, auto
// tries the next path in its order:
//
//	kernel      -> nccl-window -> nccl
//	ce          -> nccl-window -> nccl
//	nccl-window -> nccl
//	nccl
//
// In a path's turn (autoTurns) its steps are tried in order, and the first
// whose conditions all hold takes the call, with its reason. A turn may
// hand the call to another path than its own: nccl-window's gives an
// all-gather off windows to the kernel or copy engines (the table's next
// best there), NCCL's gives a call to symmem's paths where NCCL is
// unavailable or unsafe. In ce's order nccl-window's kernel step never
// takes a call copy engines refused: the kernel needs the peer mappings
// and a registered output, with which copy engines serve an all-gather.
var autoFallback = map[coll.Algo][]coll.Algo{
	coll.AlgoKernel:     {coll.AlgoKernel, coll.AlgoNCCLWindow, coll.AlgoNCCL},
	coll.AlgoCE:         {coll.AlgoCE, coll.AlgoNCCLWindow, coll.AlgoNCCL},
	coll.AlgoNCCLWindow: {coll.AlgoNCCLWindow, coll.AlgoNCCL},
	coll.AlgoNCCL:       {coll.AlgoNCCL},
}

// autoStep is one step of a path's turn.
type autoStep struct {
	algo coll.Algo // the path that takes the call; AlgoAuto: none, it is refused (autoFacts.noPath)
	when []autoCond
	why  string
	// kindWhy is the reason per op, where it names the op (constant: no
	// formatting per call).
	kindWhy map[coll.Kind]string
}

var autoTurns = map[coll.Algo][]autoStep{
	coll.AlgoKernel: {
		{algo: coll.AlgoNCCL, when: []autoCond{ncclUsable, elementwise},
			why: "auto: plain NCCL, symmem's reduction kernel would go element by element here (a buffer or the per-rank size off 16 bytes; autotable.go)"},
		{algo: coll.AlgoKernel, when: []autoCond{kernelServes}, kindWhy: map[coll.Kind]string{
			coll.AllGather:     "auto: symmem's all_gather kernel for small messages (autotable.go)",
			coll.ReduceScatter: "auto: symmem's reduce_scatter kernel for small messages (autotable.go)",
			coll.AllReduce:     "auto: symmem's all_reduce kernel for small messages (autotable.go)",
		}},
	},
	coll.AlgoCE: {
		{algo: coll.AlgoCE, when: []autoCond{ceServes}, why: "auto: copy engines for all_gather on symmetric buffers (autotable.go)"},
	},
	coll.AlgoNCCLWindow: {
		{algo: coll.AlgoNCCLWindow, when: []autoCond{goodWindows, ncclUsable}, why: "auto: NCCL on windows (autotable.go)"},
		{algo: coll.AlgoKernel, when: []autoCond{allGather, offWindows, kernelServes}, why: "auto: symmem's all-gather kernel (buffers not in NCCL windows)"},
		{algo: coll.AlgoCE, when: []autoCond{allGather, offWindows, ceServes}, why: "auto: copy engines (buffers not in NCCL windows)"},
	},
	// Without NCCL a reduction still runs on symmem's kernels: one-shot up
	// to oneShotMax, then two-shot, which reads each peer byte once where
	// one-shot reads n-1 whole inputs; lc where the kernels cannot (e.g.
	// an ordinary reduce-scatter output). Where NCCL is unavailable or
	// unsafe, copy engines take an all-gather; else the call is refused.
	coll.AlgoNCCL: {
		{algo: coll.AlgoKernel, when: []autoCond{noNCCL, notAllGather, oneShot, kernelServes}, why: "auto: NCCL unavailable, symmem's reduction kernel"},
		{algo: coll.AlgoTwoShot, when: []autoCond{noNCCL, allReduce, twoShotServes}, why: "auto: NCCL unavailable, symmem's two-shot all-reduce"},
		{algo: coll.AlgoKernel, when: []autoCond{noNCCL, notAllGather, kernelServes}, why: "auto: NCCL unavailable, symmem's reduction kernel"},
		{algo: coll.AlgoLowContention, when: []autoCond{noNCCL, notAllGather, lcServes}, why: "auto: NCCL unavailable, symmem's low-contention path"},
		{algo: coll.AlgoCE, when: []autoCond{ncclUnusable, ceServes}, why: "auto: NCCL unavailable or unsafe here, copy engines"},
		{algo: coll.AlgoAuto, when: []autoCond{ncclUnusable}},
		{algo: coll.AlgoNCCL, when: []autoCond{poorWindows}, why: "auto: plain NCCL, NCCL's symmetric kernels are slow or wrong for this shape (ncclwindow.go)"},
		{algo: coll.AlgoNCCL, when: []autoCond{notSymmetric}, why: "auto: plain NCCL, buffers are not symmetric pool blocks"},
		{algo: coll.AlgoNCCL, why: "auto: plain NCCL (autotable.go)"},
	},
}

// auto is auto's choice for c, the one reader of the table and the
// fallback order: the table's path for c's op and size, then the turns of
// the paths in its order, step by step.
func (g *Group) auto(c *call) (coll.Algo, string, error) {
	req := &c.req
	total := req.In.Len // the full tensor: all-gather's output
	if req.Kind == coll.AllGather {
		total = req.Out.Len
	}
	f := autoFacts{g: g, c: c}
	for _, s := range autoSteps[autoPick(req.Kind, total, len(g.ranks), req.Kind == coll.AllGather && req.InPlace)] {
		if !f.all(s.when) {
			continue
		}
		switch {
		case s.algo == coll.AlgoAuto:
			return coll.AlgoAuto, "", f.noPath()
		case s.kindWhy != nil:
			return s.algo, s.kindWhy[req.Kind], nil
		}
		return s.algo, s.why, nil
	}
	panic("cuda: auto: every fallback order ends in NCCL's turn, whose last step always holds")
}

// autoSteps are the steps of each fallback order, its turns one after the
// other, joined once: auto runs on every call.
var autoSteps = func() map[coll.Algo][]autoStep {
	m := map[coll.Algo][]autoStep{}
	for a, order := range autoFallback {
		for _, turn := range order {
			m[a] = append(m[a], autoTurns[turn]...)
		}
	}
	return m
}()

// autoCond is a condition of auto's steps (autoFacts.holds says when it
// holds).
type autoCond uint8

const (
	ncclUsable   autoCond = iota // the group has NCCL, and it is safe for the call
	ncclUnusable                 // not ncclUsable
	noNCCL                       // the group has no NCCL communicator
	goodWindows                  // the buffers are in windows NCCL's symmetric kernels do well
	offWindows                   // not goodWindows
	poorWindows                  // the buffers are in windows, but NCCL's symmetric kernels are slow or wrong there
	notSymmetric                 // the buffers are not pool blocks registered with the group
	elementwise                  // symmem's reduction kernel would run in element mode
	oneShot                      // a reduction the one-shot kernel does as fast as two-shot (oneShotMax)
	allGather                    // the call is an all-gather
	notAllGather                 // the call is not an all-gather (symmem's reduction paths refuse a broadcast themselves)
	allReduce                    // the call is an all-reduce
	kernelServes                 // the path can run it (its whyNot is nil) ...
	twoShotServes
	lcServes
	ceServes
)

// autoFacts answers auto's conditions for one call. The kernel's check is
// asked at most once (it formats an error when the kernel cannot run).
type autoFacts struct {
	g               *Group
	c               *call
	kernAsked, kern bool
}

// all reports whether every condition in cs holds.
func (f *autoFacts) all(cs []autoCond) bool {
	for _, c := range cs {
		if !f.holds(c) {
			return false
		}
	}
	return true
}

// holds is where auto's special rules are applied: NCCL windows' verdicts
// (ncclwindow.go: judgeWindow, on the call), element-mode reductions
// (reduceElementwise), no NCCL on groups without a communicator (NCCL not
// loaded or failed, or ranks sharing a GPU: setup), non-symmetric buffers.
func (f *autoFacts) holds(c autoCond) bool {
	g, req := f.g, &f.c.req
	// NCCL is unsafe for a shape its symmetric kernels get wrong when the
	// call cannot avoid them (no window-free communicator).
	wrong := f.c.verdict == windowWrong && g.nccl.plain == nil
	switch c {
	case ncclUsable:
		return g.nccl.comm != nil && !wrong
	case ncclUnusable:
		return g.nccl.comm == nil || wrong
	case noNCCL:
		return g.nccl.comm == nil
	case goodWindows:
		return f.c.win && f.c.verdict == windowGood
	case offWindows:
		return !f.c.win || f.c.verdict != windowGood
	case poorWindows:
		return f.c.win && f.c.verdict != windowGood
	case notSymmetric:
		return !symmetric(*req)
	case elementwise:
		return reduceElementwise(*req)
	case oneShot:
		return req.Kind == coll.ReduceScatter || req.Count*int64(req.DType.Size()) <= oneShotMax(*req, len(g.ranks))
	case allGather:
		return req.Kind == coll.AllGather
	case notAllGather:
		return req.Kind != coll.AllGather
	case allReduce:
		return req.Kind == coll.AllReduce
	case kernelServes:
		if !f.kernAsked {
			f.kernAsked, f.kern = true, g.paths.kernel.whyNot(*req) == nil
		}
		return f.kern
	case twoShotServes:
		return g.paths.twoShot.whyNot(*req) == nil
	case lcServes:
		return g.paths.lc.whyNot(*req) == nil
	case ceServes:
		return g.paths.ce.serves(*req)
	}
	panic(fmt.Sprintf("cuda: auto: condition %d", c))
}

// noPath is the error of a call no path takes: NCCL unavailable, or
// unsafe for its shape, and copy engines do not serve it.
func (f *autoFacts) noPath() error {
	g := f.g
	if f.c.verdict == windowWrong && g.nccl.plain == nil {
		return ErrNCCLWindowWrong
	}
	return fmt.Errorf("no GPU path: NCCL unavailable (%v) and %s: %w", g.nccl.err, g.paths.ce.why(f.c.req), ErrNotSupported)
}

// reduceElementwise reports whether symmem's reduction kernel would run req
// in element mode on some rank (kernel.go: reduceUnit): an address, or a
// reduce-scatter's per-rank size (chunk r starts r sizes in), off a 16-byte
// boundary. Addresses mod 16 are alike on every rank (same pool offsets,
// aligned segment bases), so every rank decides alike. Element mode is
// slower than plain NCCL (measured: results/gpu-issue22-2026-11-26.md), so
// auto leaves such calls to NCCL when the group has it.
func reduceElementwise(req backend.Request) bool {
	if req.Kind != coll.ReduceScatter && req.Kind != coll.AllReduce {
		return false
	}
	addr := req.In.Ptr | req.Out.Ptr
	if req.Kind == coll.ReduceScatter {
		addr |= uint64(req.Count * int64(req.DType.Size()))
	}
	return addr%kernAlign != 0
}

// oneShotMax is the largest all-reduce (bytes per rank) auto gives to the
// one-shot kernel without NCCL: on 2 ranks out of place, up to where
// two-shot catches up (measured with 2 ranks sharing one H100:
// results/gpu-reduce-2026-11-23.md). In place the one-shot
// kernel holds at most arMaxBytes; wider groups are not measured and read
// (n-1) inputs, so they switch at arMaxBytes too.
func oneShotMax(req backend.Request, n int) int64 {
	if n <= 2 && !req.InPlace {
		return 64 << 20
	}
	return arMaxBytes
}
