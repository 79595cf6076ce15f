package cuda

import (
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// autoRow says which algorithm `auto` picks for one op below a size.
type autoRow struct {
	upTo        int64     // total bytes (nccl-tests "size": the gathered output for all-gather), inclusive
	algo        coll.Algo // preferred; falls back when not possible (see choose)
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
