package cuda

import (
	"strings"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// pathTable lists the GPU paths, in the order Capabilities reports them.
// A path serves its ops as far as its own check allows; everything else a
// path needs from the backend derives from its row.
var pathTable = [...]pathInfo{
	{
		// auto takes it for all_to_all only with split counts on the device (nccl.turn).
		algo: coll.AlgoKernel, ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.AllToAll}, serve: "the kernels serve",
		new: func(g *core, p *pathSet, r *pathInfo) path { p.kernel = kernelPath{g: g, row: r}; return &p.kernel },
		kernArgs: func(p *pathSet) {
			p.kernel.args, p.kernel.a2a = cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(a2aArgBytes)
		},
		serves:   func(p *pathSet, req backend.Request) bool { return p.kernel.check(&req) == served },
		fallback: []coll.Algo{coll.AlgoKernel, coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			elementwiseToNCCL,
			{algo: coll.AlgoKernel, when: []autoCond{pathServes}, kindWhy: map[coll.Kind]string{
				coll.AllGather:     "auto: symmem's all_gather kernel for small messages (auto table)",
				coll.ReduceScatter: "auto: symmem's reduce_scatter kernel for small messages (auto table)",
				coll.AllReduce:     "auto: symmem's all_reduce kernel for small messages (auto table)",
			}},
		},
	},
	{
		// ll's refusals (a buffer off 16 bytes, a row larger than its area)
		// leave the call to the kernel, the next fastest at small sizes.
		algo: coll.AlgoLL, ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce}, serve: "ll serves",
		new:      func(g *core, p *pathSet, r *pathInfo) path { p.ll = llPath{g: g, row: r}; return &p.ll },
		kernArgs: func(p *pathSet) { p.ll.args = cudadrv.NewArgs(llArgBytes) },
		serves:   func(p *pathSet, req backend.Request) bool { return p.ll.check(&req) == served },
		fallback: []coll.Algo{coll.AlgoLL, coll.AlgoKernel, coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			// Above llSmallRow, symmetric buffers off 16 bytes (alike on every
			// rank) would make ll move bytes one at a time: plain NCCL is
			// ahead there.
			{algo: coll.AlgoNCCL, when: []autoCond{symmetricBufs, llBytesLarge, ncclUsable}, why: "auto: plain NCCL (ll would move these buffers byte by byte at this size)"},
			{algo: coll.AlgoLL, when: []autoCond{pathServes}, why: "auto: symmem's low-latency kernel, fastest here in the table (auto table)"},
		},
	},
	{
		algo: coll.AlgoTwoShot, ops: []coll.Kind{coll.AllReduce}, serve: "two-shot serves", opsHint: " (reduce_scatter: kernel or lc)",
		new: func(g *core, p *pathSet, r *pathInfo) path {
			p.twoShot = twoShotPath{g: g, row: r, k: &p.kernel}
			return &p.twoShot
		},
		kernArgs: func(p *pathSet) { p.twoShot.second = cudadrv.NewArgs(kernArgBytes) },
		serves:   func(p *pathSet, req backend.Request) bool { return p.twoShot.check(&req) == served },
		fallback: []coll.Algo{coll.AlgoTwoShot, coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			elementwiseToNCCL,
			{algo: coll.AlgoTwoShot, when: []autoCond{pathServes}, why: "auto: symmem's two-shot all_reduce, fastest here in the table (auto table)"},
		},
	},
	{
		algo: coll.AlgoLowContention, ops: []coll.Kind{coll.ReduceScatter, coll.AllReduce}, serve: "lc serves", gated: true,
		new:      func(g *core, p *pathSet, r *pathInfo) path { p.lc = lcPath{g: g, row: r, k: &p.kernel}; return &p.lc },
		kernArgs: func(p *pathSet) { p.lc.args = cudadrv.NewArgs(kernArgBytes) },
		serves:   func(p *pathSet, req backend.Request) bool { return p.lc.check(&req) == served },
		fallback: []coll.Algo{coll.AlgoLowContention, coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			elementwiseToNCCL,
			{algo: coll.AlgoLowContention, when: []autoCond{pathServes, lcReady}, why: "auto: symmem's low-contention path, fastest here in the table (auto table)"},
		},
	},
	{
		algo: coll.AlgoCE, ops: []coll.Kind{coll.AllGather, coll.AllToAll}, serve: "copy engines serve", gated: true,
		new:      func(g *core, p *pathSet, r *pathInfo) path { p.ce = cePath{g: g, row: r}; return &p.ce },
		serves:   func(p *pathSet, req backend.Request) bool { return p.ce.serves(req) },
		fallback: []coll.Algo{coll.AlgoCE, coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			{algo: coll.AlgoCE, when: []autoCond{pathServes}, kindWhy: map[coll.Kind]string{
				coll.AllGather: "auto: copy engines for all_gather on symmetric buffers (auto table)",
				coll.AllToAll:  "auto: copy engines for all_to_all into a symmetric output (auto table)",
			}},
		},
	},
	{
		algo: coll.AlgoNCCLWindow, ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast}, serve: "NCCL serves", gated: true,
		new:      func(g *core, p *pathSet, _ *pathInfo) path { p.window = ncclWindowPath{ncclRun{g}}; return &p.window },
		fallback: []coll.Algo{coll.AlgoNCCLWindow, coll.AlgoNCCL},
		turn: []autoStep{
			{algo: coll.AlgoNCCLWindow, when: []autoCond{goodWindows, ncclUsable}, why: "auto: NCCL on windows (auto table)"},
			// Where the table says NCCL's windows at a small size and they
			// cannot serve, ll is next fastest (the kernel takes a few times
			// ll's time for a small all-gather off 16 bytes).
			// Symmetric buffers only: their alignment and windows are alike on
			// every rank, ordinary memory's need not be.
			{algo: coll.AlgoLL, when: []autoCond{symmetricBufs, noWindows, llSmall, pathServes}, why: "auto: symmem's low-latency kernel (buffers not in NCCL windows)"},
			{algo: coll.AlgoLL, when: []autoCond{symmetricBufs, poorWindows, llSmall, pathServes}, why: "auto: symmem's low-latency kernel (NCCL's symmetric kernels are slow or wrong for this shape)"},
			{algo: coll.AlgoKernel, when: []autoCond{allGather, noWindows, pathServes}, why: "auto: symmem's all-gather kernel (buffers not in NCCL windows)"},
			{algo: coll.AlgoCE, when: []autoCond{allGather, noWindows, pathServes}, why: "auto: copy engines (buffers not in NCCL windows)"},
			{algo: coll.AlgoKernel, when: []autoCond{allGather, poorWindows, pathServes}, why: "auto: symmem's all-gather kernel (NCCL's symmetric kernels are slow or wrong for this shape)"},
			{algo: coll.AlgoCE, when: []autoCond{allGather, poorWindows, pathServes}, why: "auto: copy engines (NCCL's symmetric kernels are slow or wrong for this shape)"},
		},
	},
	{
		algo: coll.AlgoNCCL, ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast, coll.AllToAll}, serve: "NCCL serves", gated: true,
		new:      func(g *core, p *pathSet, _ *pathInfo) path { p.nccl = ncclPath{ncclRun{g}}; return &p.nccl },
		fallback: []coll.Algo{coll.AlgoNCCL},
		// Without NCCL a reduction still runs on symmem's kernels: one-shot up
		// to oneShotMax, then two-shot, which reads each peer byte once where
		// one-shot reads n-1 whole inputs; lc where the kernels cannot (e.g.
		// an ordinary reduce-scatter output). Where NCCL is unavailable or
		// unsafe, copy engines take an all-gather; else the call is refused.
		turn: []autoStep{
			// No measurement orders the all-to-all paths yet: the kernel
			// for split counts on the device (the one path that reads
			// them), copy engines where they serve, which needs no NCCL,
			// else NCCL.
			{algo: coll.AlgoKernel, when: []autoCond{deviceSplits, pathServes}, why: "auto: symmem's all-to-all kernel, the one path that reads split counts on the device"},
			{algo: coll.AlgoCE, when: []autoCond{allToAll, pathServes}, why: "auto: copy engines for all_to_all into a symmetric output (no measured rows)"},
			{algo: coll.AlgoNCCL, when: []autoCond{allToAll, ncclUsable}, why: "auto: NCCL for all_to_all (copy engines do not serve this call)"},
			{algo: coll.AlgoAuto, when: []autoCond{allToAll}},
			{algo: coll.AlgoKernel, when: []autoCond{noNCCL, notAllGather, oneShot, pathServes}, why: "auto: NCCL unavailable, symmem's reduction kernel"},
			{algo: coll.AlgoTwoShot, when: []autoCond{noNCCL, allReduce, pathServes}, why: "auto: NCCL unavailable, symmem's two-shot all-reduce"},
			{algo: coll.AlgoKernel, when: []autoCond{noNCCL, notAllGather, pathServes}, why: "auto: NCCL unavailable, symmem's reduction kernel"},
			{algo: coll.AlgoLowContention, when: []autoCond{noNCCL, notAllGather, pathServes}, why: "auto: NCCL unavailable, symmem's low-contention path"},
			{algo: coll.AlgoCE, when: []autoCond{ncclUnusable, pathServes}, why: "auto: NCCL unavailable or unsafe here, copy engines"},
			{algo: coll.AlgoAuto, when: []autoCond{ncclUnusable}},
			{algo: coll.AlgoNCCL, when: []autoCond{poorWindows}, why: "auto: plain NCCL, NCCL's symmetric kernels are slow or wrong for this shape"},
			{algo: coll.AlgoNCCL, when: []autoCond{notSymmetric}, why: "auto: plain NCCL, buffers are not symmetric pool blocks"},
			{algo: coll.AlgoNCCL, why: "auto: plain NCCL (auto table)"},
		},
	},
	{
		// auto does not take it (no measurement shows it ahead yet: issue
		// 27); a call forces it.
		algo: coll.AlgoHier, ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce}, serve: "the hierarchical path serves", gated: true,
		new: func(g *core, p *pathSet, r *pathInfo) path { p.hier = hierPath{g: g, row: r}; return &p.hier },
	},
}

// pathSet is a group's paths, each holding what only it uses; all[i] is
// pathTable[i]'s.
type pathSet struct {
	kernel  kernelPath
	twoShot twoShotPath
	lc      lcPath
	ll      llPath
	ce      cePath
	nccl    ncclPath
	window  ncclWindowPath
	hier    hierPath

	all []path
	g   *core // what they share, and what choose asks
}

// init makes the group's paths in place (they point into p).
func (p *pathSet) init(g *core) {
	p.g = g
	p.all = make([]path, len(pathTable))
	for i := range pathTable {
		p.all[i] = pathTable[i].new(g, p, &pathTable[i])
	}
}

// withKernels allocates the parameter blocks of the paths that launch
// symmem's kernels.
func (p *pathSet) withKernels() {
	for i := range pathTable {
		if f := pathTable[i].kernArgs; f != nil {
			f(p)
		}
	}
}

// pathIndex is algorithm a's row in pathTable (-1: none). Run asks on
// every call: the length and first byte rule out the other rows without
// comparing their names, and a's name is mostly the row's own constant.
func pathIndex(a coll.Algo) int {
	for i := range pathTable {
		if r := pathTable[i].algo; len(r) == len(a) && r[0] == a[0] && r == a {
			return i
		}
	}
	return -1
}

// pathRow is algorithm a's row (nil: not a GPU path).
func pathRow(a coll.Algo) *pathInfo {
	if i := pathIndex(a); i >= 0 {
		return &pathTable[i]
	}
	return nil
}

// gated reports whether calls on path a wait for the gate's approval.
func gated(a coll.Algo) bool {
	r := pathRow(a)
	return r != nil && r.gated
}

// gpuAlgos are the algorithms a call may force on this backend, per op
// (whether a group can run one is decided per call: ErrRefused).
var gpuAlgos = map[coll.Kind][]coll.Algo{}

// gpuPathList names the GPU paths for choose's error.
var gpuPathList string

func init() {
	var names []string
	for i := range pathTable {
		r := &pathTable[i]
		r.requested = string(r.algo) + " requested"
		for _, k := range r.ops {
			r.kinds |= 1 << k
			gpuAlgos[k] = append(gpuAlgos[k], r.algo)
		}
		names = append(names, string(r.algo))
	}
	gpuPathList = "auto, " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	for i := range pathTable {
		r := &pathTable[i]
		for _, turn := range r.fallback {
			for _, s := range pathRow(turn).turn {
				s.row = pathIndex(s.algo)
				r.order = append(r.order, s)
			}
		}
	}
}
