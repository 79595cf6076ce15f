package cuda

import (
	"errors"
	"github.com/symmem/symmem/internal/tune"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// at places req's buffers at in and out.
func at(req backend.Request, in, out uint64) backend.Request {
	req.In.Ptr, req.Out.Ptr = in, out
	return req
}

func TestJudgeWindow(t *testing.T) {
	v2289 := libnccl.Version(2, 28, 9)
	req := func(k coll.Kind, dt coll.DType, count int64, inPlace bool) backend.Request {
		return backend.Request{Kind: k, DType: dt, Count: count, InPlace: inPlace}
	}
	tests := []struct {
		name string
		req  backend.Request
		v    int
		want windowVerdict
	}{
		{"rs bf16 361 (the stress case)", req(coll.ReduceScatter, coll.BFloat16, 361, true), v2289, windowWrong},
		{"rs f16 4015 out of place", req(coll.ReduceScatter, coll.Float16, 4015, false), v2289, windowWrong},
		{"rs bf16 even, not 16 B", req(coll.ReduceScatter, coll.BFloat16, 4015*2, false), v2289, windowSlow},
		{"rs bf16 16 B multiple", req(coll.ReduceScatter, coll.BFloat16, 4096, false), v2289, windowGood},
		{"rs f32 odd count is 4 B aligned", req(coll.ReduceScatter, coll.Float32, 361, false), v2289, windowSlow},
		{"ag in place bf16 odd", req(coll.AllGather, coll.BFloat16, 361, true), v2289, windowWrong},
		{"ag in place int8 6", req(coll.AllGather, coll.Int8, 6, true), v2289, windowWrong},
		{"ag out of place bf16 odd", req(coll.AllGather, coll.BFloat16, 361, false), v2289, windowSlow},
		{"ar bf16 odd", req(coll.AllReduce, coll.BFloat16, 361, true), v2289, windowSlow},
		{"bc int8 odd", req(coll.Broadcast, coll.Int8, 3, true), v2289, windowSlow},
		{"ar f32 4 KiB", req(coll.AllReduce, coll.Float32, 1024, false), v2289, windowGood},
		{"no windows before 2.27", req(coll.ReduceScatter, coll.BFloat16, 361, true), libnccl.Version(2, 26, 2), windowSlow},
		{"newest known release still buggy", req(coll.ReduceScatter, coll.BFloat16, 361, true), libnccl.Version(2, 32, 6), windowWrong},
		// The stress cases: bf16 buffers at odd element offsets.
		{"ar bf16 aligned size, buffer 2 B past 4", at(req(coll.AllReduce, coll.BFloat16, 952, true), 0x1000a, 0x1000a), v2289, windowWrong},
		{"rs bf16 aligned size, input 2 B past 4", at(req(coll.ReduceScatter, coll.BFloat16, 256, false), 0x1006e, 0x20000), v2289, windowWrong},
		{"ag bf16 output 2 B past 4", at(req(coll.AllGather, coll.BFloat16, 256, false), 0x10000, 0x20002), v2289, windowWrong},
		{"ar bf16 buffer 4 B past 16", at(req(coll.AllReduce, coll.BFloat16, 256, false), 0x10004, 0x20004), v2289, windowSlow},
		{"bc reads only the output", at(req(coll.Broadcast, coll.BFloat16, 256, true), 0x10002, 0x20000), v2289, windowGood},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeWindow(tc.req, tc.v); got != tc.want {
				t.Fatalf("judgeWindow = %d, want %d", got, tc.want)
			}
		})
	}
}

// startAt is an auto table that starts every op, type, rank count and
// size on path a.
func startAt(t *testing.T, a coll.Algo) *tune.Table {
	t.Helper()
	tb := &tune.Table{Format: tune.FormatVersion, Machine: tune.Machine{Backend: "cuda"}}
	for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
		tb.Rows = append(tb.Rows, tune.Row{Op: k, Ranks: tune.Ranks{Min: 2}, Algo: a})
	}
	if err := tb.Validate(); err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestChooseWindowShapes: buffers in windows on NCCL 2.28.9; known-wrong
// shapes never reach NCCL's symmetric kernels, slow ones are not auto's.
func TestChooseWindowShapes(t *testing.T) {
	withNCCL := func(plain bool) *Group {
		g := fakeGroup(2, 1)
		g.caps.ce = false
		g.b.nccl.lib = &libnccl.Lib{Version: libnccl.Version(2, 28, 9), HasWindows: true}
		g.nccl = ncclGroup{comm: &bnccl.Comm{}, windows: true}
		if plain {
			g.nccl.plain = &bnccl.Comm{}
		}
		return g
	}
	g, noPlain, kg := withNCCL(true), withNCCL(false), withNCCL(true)
	// The rules after auto's table are under test, not the table: a user's
	// table pins where auto starts (windows, or symmem's kernel for kg).
	g.b.table, noPlain.b.table, kg.b.table = startAt(t, coll.AlgoNCCLWindow), startAt(t, coll.AlgoNCCLWindow), startAt(t, coll.AlgoKernel)
	kg.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer kg.paths.kernel.args.Free()
	rsIn := func(g *Group, count int64, dt coll.DType) backend.Request {
		r := rsReq(g, count)
		r.DType = dt
		r.In.Len, r.Out.Len = count*int64(dt.Size())*2, count*int64(dt.Size())
		r.Out.Ptr, r.OutSym.Off = r.In.Ptr+uint64(int64(g.Me)*r.Out.Len), r.InSym.Off+int64(g.Me)*r.Out.Len
		return r.Shaped(2, g.Me)
	}
	tests := []struct {
		name  string
		g     *Group
		req   backend.Request
		algo  coll.Algo
		want  coll.Algo
		wrong bool // refused with ErrNCCLWindowWrong
	}{
		{"auto rs bf16 361 in place -> plain nccl", g, rsIn(g, 361, coll.BFloat16), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"nccl-window rs bf16 361 refused", g, rsIn(g, 361, coll.BFloat16), coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, true},
		{"nccl rs bf16 361 on the window-free communicator", g, rsIn(g, 361, coll.BFloat16), coll.AlgoNCCL, coll.AlgoNCCL, false},
		{"nccl rs bf16 361 without a window-free communicator refused", noPlain, rsIn(noPlain, 361, coll.BFloat16), coll.AlgoNCCL, coll.AlgoNCCL, true},
		{"auto rs bf16 361 without a window-free communicator refused", noPlain, rsIn(noPlain, 361, coll.BFloat16), coll.AlgoAuto, coll.AlgoAuto, true},
		{"nccl-window rs f32 361 runs (right, slow)", g, rsIn(g, 361, coll.Float32), coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, false},
		{"auto rs f32 361 -> plain nccl (slow on windows)", g, rsIn(g, 361, coll.Float32), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"auto rs bf16 4096 -> windows", g, rsIn(g, 4096, coll.BFloat16), coll.AlgoAuto, coll.AlgoNCCLWindow, false},
		{"nccl-window ag in place odd refused", g, gatherReq(g, 361, true), coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, true},
		{"nccl-window ag out of place odd runs", g, gatherReq(g, 361, false), coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, false},
		{"auto ag in place odd -> plain nccl", g, gatherReq(g, 361, true), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"auto ar bf16 odd -> plain nccl", g, arReq(g, 361, coll.BFloat16, true), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"auto ar bf16 4096 -> windows", g, arReq(g, 4096, coll.BFloat16, true), coll.AlgoAuto, coll.AlgoNCCLWindow, false},
		{"nccl-window ar bf16 at an odd element refused", g, at(arReq(g, 4096, coll.BFloat16, true), seg1(g).bases[1]+10, seg1(g).bases[1]+10), coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, true},
		{"auto rs bf16 361 with kernels -> plain nccl (element mode)", kg, rsIn(kg, 361, coll.BFloat16), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"kernel rs bf16 361 forced runs (element mode)", kg, rsIn(kg, 361, coll.BFloat16), coll.AlgoKernel, coll.AlgoKernel, false},
		{"auto rs bf16 4096 with kernels -> kernel", kg, rsIn(kg, 4096, coll.BFloat16), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto ar bf16 361 with kernels -> kernel (vector mode, tail)", kg, arReq(kg, 361, coll.BFloat16, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto ar bf16 at an odd element with kernels -> plain nccl", kg, at(arReq(kg, 4096, coll.BFloat16, false), seg1(kg).bases[1]+512<<20+10, seg1(kg).bases[1]+10), coll.AlgoAuto, coll.AlgoNCCL, false},
		{"auto ag bf16 odd with kernels -> kernel", kg, gatherReq(kg, 361, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto ar bf16 at an odd element -> plain nccl", g, at(arReq(g, 4096, coll.BFloat16, true), seg1(g).bases[1]+10, seg1(g).bases[1]+10), coll.AlgoAuto, coll.AlgoNCCL, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Algo = tc.algo
			got, why, err := chooseReq(tc.g, req, true)
			if tc.wrong != errors.Is(err, ErrNCCLWindowWrong) {
				t.Fatalf("err = %v, want ErrNCCLWindowWrong %v", err, tc.wrong)
			}
			if !tc.wrong && err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tc.want {
				t.Fatalf("algo %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}
