package cuda

import "github.com/symmem/symmem/coll"

// autoRow says which algorithm `auto` picks for one op below a size.
type autoRow struct {
	upTo int64     // total bytes (nccl-tests "size": the gathered output for all-gather), inclusive
	algo coll.Algo // preferred; falls back when not possible (see choose)
}

// autoTable is measured on the 2x H200 machine (NVLink NV18, driver 580.159,
// NCCL 2.28.9): bench/results/gpu-2026-11-21.md, run 3 (symmem bench through
// cuda.Target, bf16, 2 ranks). All-gather: NCCL on windows wins up to 4 MiB
// (1 MiB 10.7/8.8 us out-of-place/in-place vs copy engines 15.0/13.4; 4 MiB
// 16.9/12.8 vs 28.0/17.6), copy engines from 16 MiB (44.9/33.3 vs
// 51.9/33.7 us; 256 MiB 350/374 vs 226/283 GB/s; 1 GiB 383/384 vs 234/287).
// Reduce-scatter and all-reduce: windows up to 8 MiB, then plain NCCL on the
// window-free communicator (4x H200, gpu-scale-2026-11-21.md: at 1 GiB plain
// reduce-scatter 323 vs 210 GB/s on windows, all-reduce 354 vs 263).
var autoTable = map[coll.Kind][]autoRow{
	coll.AllGather:     {{upTo: 16 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
	coll.ReduceScatter: {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.AllReduce:     {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.Broadcast:     {{upTo: 1 << 62, algo: coll.AlgoNCCL}},
}

// autoTableWide replaces rows for groups of more than 2 ranks, measured on
// 4x H200 (bench/results/gpu-scale-2026-11-21.md): copy engines overtake NCCL
// windows for all-gather only above 64 MiB there (64 MiB 279-292 vs 309
// GB/s busbw; 256 MiB 347-358 vs 327).
var autoTableWide = map[coll.Kind][]autoRow{
	coll.AllGather: {{upTo: 4 << 20, algo: coll.AlgoKernel}, {upTo: 64 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoCE}},
}

func autoPick(k coll.Kind, total int64, n int) coll.Algo {
	rows := autoTable[k]
	if w, ok := autoTableWide[k]; ok && n > 2 {
		rows = w
	}
	for _, r := range rows {
		if total <= r.upTo {
			return r.algo
		}
	}
	return coll.AlgoNCCL
}
