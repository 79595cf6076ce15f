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

// autoTable is measured on the 2x H200 machine (NVLink NV18, driver 580.159,
// NCCL 2.28.9), bf16, 2 ranks, `symmem bench` through the launcher
// (results/gpu-kernel-2026-11-21.md, run 9). All-gather: symmem's
// kernel wins up to 16 MiB (1 MiB 9.2/8.9 us out-of-place/in-place vs NCCL
// windows 10.6/9.6 and plain NCCL 11.8/10.6), except in-place around 4 MiB,
// where NCCL's window kernel is faster (12.4 vs 14.1 us; out-of-place 16.2
// vs 14.2); at 64 MiB the kernel (104/102 us) and copy engines (116/105)
// are close and copy engines use no SMs, so they take over above 16 MiB
// (256 MiB 357/368 GB/s busbw, 1 GiB 381/386; plain NCCL 245/255, 268/290).
// All-reduce (run 12): symmem's one-shot kernel up to 2 MiB, its limit (16
// KiB 7.4 us vs NCCL windows 9.4 and plain NCCL 10.9; 1 MiB 10.8 vs 16.3 and
// 14.3; 2 MiB 14.4 vs 19.6 and 27.1), windows to 8 MiB (4 MiB 28.9 vs 33.1,
// run 11). Reduce-scatter (run 16) on the same kernel up to 4 MiB of input (2
// MiB out per rank; 1 MiB 9.2 us vs windows 12.5 and plain 11.2; 4 MiB 14.6
// vs 21.9 and 23.0), windows to 8 MiB. Above, plain NCCL on the
// window-free communicator (4x H200, gpu-scale-2026-11-21.md: at 1 GiB plain
// reduce-scatter 323 vs 210 GB/s on windows, all-reduce 354 vs 263).
var autoTable = map[coll.Kind][]autoRow{
	coll.AllGather: {{upTo: 2 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow, inPlaceOnly: true},
		{upTo: 16 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
	coll.ReduceScatter: {{upTo: 4 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.AllReduce:     {{upTo: 2 << 20, algo: coll.AlgoKernel}, {upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.Broadcast:     {{upTo: 1 << 62, algo: coll.AlgoNCCL}},
}

// autoTableWide replaces rows for groups of more than 2 ranks, measured on
// 4x H200 (results/gpu-kernel-2026-11-21.md, 4 ranks): the kernel
// matches or beats NCCL windows up to 64 MiB (64 KiB 8.4 vs 10.1 us, 1 MiB
// 11.1 vs 11.0, 64 MiB 157/156 vs 157/185 out-of-place/in-place), copy
// engines win from 256 MiB (gpu-scale-2026-11-21.md: 340-353 GB/s vs 331).
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
// slower than plain NCCL: reduce-scatter of 513..4194305 bf16 per rank on
// 2x H100 took 11.9/15.7/18.3/82.2 us against NCCL's 7.6/8.1/11.7/35.8
// (results/gpu-issue22-2026-11-26.md), so auto leaves such calls to NCCL
// when the group has it.
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
