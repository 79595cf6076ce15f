package cuda

import "github.com/symmem/symmem/coll"

// autoRow says which algorithm `auto` picks for one op below a size.
type autoRow struct {
	upTo int64     // total bytes (nccl-tests "size": the gathered output for all-gather), inclusive
	algo coll.Algo // preferred; falls back when not possible (see choose)
}

// autoTable is measured on the 2x H200 machine (NVLink NV18, driver 580.159,
// NCCL 2.28.9), bf16, 2 ranks. All-gather (bench/results/gpu-kernel-2026-11-21.md):
// symmem's kernel wins up to 16 MiB (1 MiB 9.4/9.2 us out-of-place/in-place
// vs NCCL windows 12.2/12.8 and copy engines 20.0/19.8; 16 MiB 32.0/32.1 vs
// 42.8/32.5 and 43.6/42.8); at 64 MiB kernel and copy engines tie (108.5 vs
// 116.4 us) and copy engines use no SMs, so they take over there (256 MiB
// 357/370 GB/s busbw vs kernel 332, NCCL 240/256). Reduce-scatter and
// all-reduce: windows up to 8 MiB, then plain NCCL on the window-free
// communicator (4x H200, gpu-scale-2026-11-21.md: at 1 GiB plain
// reduce-scatter 323 vs 210 GB/s on windows, all-reduce 354 vs 263).
var autoTable = map[coll.Kind][]autoRow{
	coll.AllGather:     {{upTo: 16 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
	coll.ReduceScatter: {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.AllReduce:     {{upTo: 8 << 20, algo: coll.AlgoNCCLWindow}, {upTo: 1 << 62, algo: coll.AlgoNCCL}},
	coll.Broadcast:     {{upTo: 1 << 62, algo: coll.AlgoNCCL}},
}

// autoTableWide replaces rows for groups of more than 2 ranks, measured on
// 4x H200 (bench/results/gpu-kernel-2026-11-21.md, 4 ranks): the kernel
// matches or beats NCCL windows up to 64 MiB (64 KiB 8.4 vs 10.1 us, 1 MiB
// 11.1 vs 11.0, 64 MiB 157/156 vs 157/185 out-of-place/in-place), copy
// engines win from 256 MiB (gpu-scale-2026-11-21.md: 340-353 GB/s vs 331).
var autoTableWide = map[coll.Kind][]autoRow{
	coll.AllGather: {{upTo: 64 << 20, algo: coll.AlgoKernel}, {upTo: 1 << 62, algo: coll.AlgoCE}},
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
