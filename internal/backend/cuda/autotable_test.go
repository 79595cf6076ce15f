package cuda

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/tune"
)

// TestBuiltinTableGenerated: the committed autotable_builtin.go is what
// the generator writes from results/auto (run `go generate
// ./internal/backend/cuda` after changing the files there).
func TestBuiltinTableGenerated(t *testing.T) {
	want, err := tune.Generate("../../../results/auto", "cuda", "builtinTable")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("autotable_builtin.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("autotable_builtin.go is not the generator's output for results/auto: run go generate ./internal/backend/cuda\n--- generated:\n%s", want)
	}
}

// TestBuiltinTablePaths: every path the built-in table names is one auto
// can start from (a report of another backend in results/auto, say the
// cpu's direct, would otherwise reach the table: auto has no fallback order
// for it).
func TestBuiltinTablePaths(t *testing.T) {
	for _, a := range builtinTable.Algos() {
		if r := pathRow(a); r == nil || r.fallback == nil {
			t.Errorf("the built-in table names %q, which auto cannot start from (%v): results/auto holds a report of another backend?", a, autoStarts())
		}
	}
	if builtinTable.Machine.Backend != "cuda" {
		t.Errorf("the built-in table was measured on the %q backend", builtinTable.Machine.Backend)
	}
}

// TestAutoMeetsMeasurements: at every size, placement and rank count the
// committed `symmem tune` reports in results/auto measured, the path auto
// starts from (the built-in table; its graph rows for replays measured
// with -G) was within Tie of the fastest path there: auto/best >= 0.97 on the data the table came from. (The GPU run
// of `symmem tune` or `symmem bench --algo auto,...` checks it on the
// machine: docs/gpu.md.)
func TestAutoMeetsMeasurements(t *testing.T) {
	const dir = "../../../results/auto"
	root, err := tune.ModuleRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	ins, _, err := tune.ReadDir(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		op      coll.Kind
		class   tune.Class
		ranks   int
		inPlace bool
		graph   bool // measured as CUDA-graph replays: the graph rows answer
		bytes   int64
	}
	times := map[point]map[coll.Algo]float64{}
	for _, in := range ins {
		for _, m := range in.Measurements {
			p := point{m.Op, m.Class, m.Ranks, m.InPlace, m.Graph, m.Bytes}
			if times[p] == nil {
				times[p] = map[coll.Algo]float64{}
			}
			if t0, ok := times[p][m.Algo]; !ok || m.TimeUs < t0 {
				times[p][m.Algo] = m.TimeUs
			}
		}
	}
	if len(times) == 0 {
		t.Skip("no measurements in results/auto")
	}
	dtOf := map[tune.Class]coll.DType{tune.F16: coll.BFloat16, tune.F32: coll.Float32, tune.Other: coll.Int32}
	for p, ts := range times {
		best := ts[coll.AlgoNCCL]
		for _, x := range ts {
			best = min(best, x)
		}
		a := autoPick(nil, p.op, dtOf[p.class], p.bytes, p.ranks, p.inPlace, p.graph)
		got, ok := ts[a]
		switch {
		case !ok:
			t.Errorf("%v %v %d ranks in place %v %d bytes: auto starts from %s, which was not measured there (%v)", p.op, p.class, p.ranks, p.inPlace, p.bytes, a, ts)
		case got > best*(1+tune.Tie):
			t.Errorf("%v %v %d ranks in place %v %d bytes: auto starts from %s at %.2f us, the fastest took %.2f us (auto/best %.2f)", p.op, p.class, p.ranks, p.inPlace, p.bytes, a, got, best, best/got)
		}
	}
}

// TestAutoPickUserTable: a user's table answers first; where it has no row
// (another op, a size above its bounds) the built-in one does.
func TestAutoPickUserTable(t *testing.T) {
	user := &tune.Table{Format: tune.FormatVersion, Machine: tune.Machine{Backend: "cuda", GPU: "NVIDIA H100 80GB HBM3", NCCL: "2.28.9"},
		Rows: []tune.Row{
			{Op: coll.AllReduce, Class: tune.F16, Ranks: tune.Ranks{Min: 2, Max: 2}, UpTo: 64 << 20, Algo: coll.AlgoTwoShot},
			{Op: coll.AllGather, Ranks: tune.Ranks{Min: 2}, Algo: coll.AlgoNCCL},
		}}
	if err := user.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		k     coll.Kind
		dt    coll.DType
		total int64
		n     int
		want  coll.Algo
	}{
		{coll.AllReduce, coll.BFloat16, 1 << 20, 2, coll.AlgoTwoShot},
		{coll.AllReduce, coll.Float32, 1 << 20, 2, ""},  // no 32-bit-float rows in the user's table: built-in
		{coll.AllReduce, coll.BFloat16, 1 << 30, 2, ""}, // above the user's bound: built-in
		{coll.AllGather, coll.BFloat16, 1 << 10, 4, coll.AlgoNCCL},
		{coll.ReduceScatter, coll.BFloat16, 1 << 20, 2, ""}, // built-in
	}
	for _, tt := range tests {
		if tt.want == "" {
			var ok bool
			if tt.want, ok = builtinTable.Pick(tt.k, tt.dt, tt.n, false, false, tt.total); !ok {
				t.Fatalf("the built-in table has no row for %v %v %d bytes on %d ranks", tt.k, tt.dt, tt.total, tt.n)
			}
		}
		if got := autoPick(user, tt.k, tt.dt, tt.total, tt.n, false, false); got != tt.want {
			t.Errorf("autoPick(user, %v, %v, %d, n=%d) = %s, want %s", tt.k, tt.dt, tt.total, tt.n, got, tt.want)
		}
	}
}

func TestCheckAutoTable(t *testing.T) {
	here := tune.Machine{Backend: "cuda", GPU: "NVIDIA H100 80GB HBM3", Count: 2, Link: "nvlink", Driver: "12.8", NCCL: "2.28.9"}
	mk := func(m tune.Machine, a coll.Algo) *tune.Table {
		t := &tune.Table{Format: tune.FormatVersion, Machine: m, Rows: []tune.Row{{Op: coll.AllReduce, Ranks: tune.Ranks{Min: 2}, Algo: a}}}
		return tune.Must(t)
	}
	other := here
	other.Count, other.Driver, other.Link, other.NCCL = 8, "13.0", "pcie", "2.28.3"
	noNCCL := here
	noNCCL.NCCL = ""
	for _, c := range []struct {
		name      string
		table, on tune.Machine
	}{
		{"count, driver, link and NCCL patch differ", other, here},
		// Where this rank has no NCCL there is no version to compare: a
		// table measured without NCCL (`symmem tune` records none) or
		// with it is accepted.
		{"no NCCL in the table or on this rank", noNCCL, noNCCL},
		{"NCCL in the table, none on this rank", here, noNCCL},
	} {
		if err := CheckAutoTable(mk(c.table, coll.AlgoKernel), c.on); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, c := range []struct {
		m    tune.Machine
		a    coll.Algo
		want string
	}{
		{here, coll.AlgoDirect, `path "direct" is not one the GPU backend's auto can start from`},
		{tune.Machine{Backend: "cpu"}, coll.AlgoNCCL, `measured on the "cpu" backend`},
		{tune.Machine{Backend: "cpu"}, coll.AlgoDirect, `measured on the "cpu" backend, not cuda: re-run`}, // a CPU table: the backend is the reason, not its direct path
		{tune.Machine{Backend: "cuda", GPU: "NVIDIA H200"}, coll.AlgoNCCL, "measured on NVIDIA H200, this rank has NVIDIA H100 80GB HBM3"},
		{tune.Machine{Backend: "cuda", GPU: here.GPU, NCCL: "2.27.3"}, coll.AlgoNCCL, "NCCL 2.27.3, this rank loaded NCCL 2.28.9"},
		// A table that names no machine passed every machine's check: one
		// written by hand, or from nowhere, steered auto unchecked.
		{tune.Machine{}, coll.AlgoNCCL, "auto table names no backend, no GPU and no NCCL version"},
		{tune.Machine{Backend: "cuda"}, coll.AlgoNCCL, "auto table names no GPU and no NCCL version"},
		{tune.Machine{Backend: "cuda", NCCL: "2.28.9"}, coll.AlgoNCCL, "names no GPU: "},
		{tune.Machine{Backend: "cuda", GPU: here.GPU}, coll.AlgoNCCL, "names no NCCL version (this rank loaded NCCL 2.28.9)"},
		{tune.Machine{Backend: "cuda"}, coll.AlgoNCCL, "make one on this machine with `symmem tune -o FILE`"},
	} {
		err := CheckAutoTable(mk(c.m, c.a), here)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errs.Invalid) {
			t.Errorf("%+v %s: %v, want an Invalid error containing %q", c.m, c.a, err, c.want)
		}
	}
}

// TestAutoStartsFromMeasuredPaths: a table may start auto from two-shot
// or lc (where they measured fastest); where they do not serve the call
// it falls back in their order, down to NCCL.
func TestAutoStartsFromMeasuredPaths(t *testing.T) {
	user := tune.Must(&tune.Table{Format: tune.FormatVersion, Machine: tune.Machine{Backend: "cuda"}, Rows: []tune.Row{
		{Op: coll.AllReduce, Ranks: tune.Ranks{Min: 1}, Algo: coll.AlgoTwoShot},
		{Op: coll.ReduceScatter, Ranks: tune.Ranks{Min: 1}, Algo: coll.AlgoLowContention},
	}})
	for _, c := range []struct {
		cfg       goldenCfg
		kind      coll.Kind
		want, why string
	}{
		{chooseCfgs[0], coll.AllReduce, "two-shot", "fastest here in the table"},
		{chooseCfgs[0], coll.ReduceScatter, "lc", "fastest here in the table"},
		{chooseCfgs[4], coll.AllReduce, "nccl-window", "NCCL on windows"}, // no kernels: two-shot does not serve, its order goes on
	} {
		g, _ := goldenGroup(t, c.cfg, 2, 0)
		g.b.table = user
		req := arReq(g, 64<<10, coll.BFloat16, false)
		if c.kind == coll.ReduceScatter {
			req = rsReq(g, 64<<10)
		}
		p := g.Explain(req)
		if string(p.Algo) != c.want || !strings.Contains(p.Reason, c.why) {
			t.Errorf("%s %v: %s (%s), want %s (%q)", c.cfg.name, c.kind, p.Algo, p.Reason, c.want, c.why)
		}
	}
}

// captureExec is an executor whose stream s is being captured; it counts
// the questions.
type captureExec struct {
	nopExec
	s     uint64
	asked *int
}

func (x captureExec) capturing(_ *cudadrv.Context, s uint64) (bool, error) {
	*x.asked++
	return s == x.s, nil
}

// TestAutoGraphRows: a call captured into a CUDA graph starts from the
// table's graph rows, an eager one from its rows; the driver is asked
// whether a stream is captured only where the two answer differently (a
// table without graph rows: never).
func TestAutoGraphRows(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "graph", kern: true, ce: true}, 2, 0)
	user := &tune.Table{Format: tune.FormatVersion, Machine: builtinTable.Machine,
		Rows:      []tune.Row{{Op: coll.AllGather, Ranks: tune.Ranks{Min: 2, Max: 2}, Algo: coll.AlgoCE}},
		GraphRows: []tune.Row{{Op: coll.AllGather, Ranks: tune.Ranks{Min: 2, Max: 2}, UpTo: 1 << 20, Algo: coll.AlgoKernel}}}
	if err := user.Validate(); err != nil {
		t.Fatal(err)
	}
	asked := 0
	g.b.table, g.x = user, captureExec{s: callerStream, asked: &asked}
	for _, tc := range []struct {
		stream uint64
		count  int64
		want   coll.Algo
	}{
		{callerStream, 1 << 14, coll.AlgoKernel}, // captured, 64 KiB: the graph row
		{ownStream, 1 << 14, coll.AlgoCE},        // eager: the row
		{callerStream, 1 << 20, coll.AlgoCE},     // captured, 4 MiB: above the graph rows, the row (not asked)
	} {
		req := makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, tc.count, true, "io", 0).req
		req.Stream = tc.stream
		if a, why, err := chooseReq(g, req, false); err != nil || a != tc.want {
			t.Errorf("stream %#x, %d elements: %s (%s, %v), want %s", tc.stream, tc.count, a, why, err, tc.want)
		}
	}
	if asked != 2 {
		t.Errorf("asked whether the stream is captured %d times, want 2", asked)
	}
	// Neither table with graph rows (the built-in one swapped for the
	// transcription, which has none): the driver is never asked.
	plain := goldenTable(t)
	defer func(b *tune.Table) { builtinTable = b }(builtinTable)
	builtinTable = plain
	g.b.table, asked = plain, 0
	req := makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req
	req.Stream = callerStream
	if _, _, err := chooseReq(g, req, false); err != nil || asked != 0 {
		t.Errorf("without graph rows: %v, asked %d times, want 0", err, asked)
	}
}

// TestAutoLLOffsets: where the table names ll, symmetric buffers off 16
// bytes go to ll up to llSmallRow per rank (its bytes mode) and to plain
// NCCL above; where it names NCCL's windows and they cannot serve, ll takes
// rows up to llSmallRow.
func TestAutoLLOffsets(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "lloff", kern: true, ce: true, nccl: "full"}, 2, 0)
	for _, tc := range []struct {
		table coll.Algo
		count int64 // bf16 elements per rank
		shift int64
		win   bool
		want  coll.Algo
	}{
		{coll.AlgoLL, 1 << 18, 0, true, coll.AlgoLL},   // 512 KiB, aligned
		{coll.AlgoLL, 1 << 18, 4, true, coll.AlgoNCCL}, // 512 KiB, off 16: NCCL
		{coll.AlgoLL, 1 << 16, 4, true, coll.AlgoLL},   // 128 KiB, off 16: bytes mode
		{coll.AlgoNCCLWindow, 1 << 12, 0, false, coll.AlgoLL},
		{coll.AlgoNCCLWindow, 1 << 18, 0, false, coll.AlgoKernel}, // above llSmallRow: as before
	} {
		user := &tune.Table{Format: tune.FormatVersion, Machine: builtinTable.Machine,
			Rows: []tune.Row{{Op: coll.AllGather, Ranks: tune.Ranks{Min: 2, Max: 2}, Algo: tc.table}}}
		if err := user.Validate(); err != nil {
			t.Fatal(err)
		}
		g.b.table = user
		req := makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, tc.count, false, "io", tc.shift).req
		if a, why, err := chooseReq(g, req, tc.win); err != nil || a != tc.want {
			t.Errorf("table %s, %d elements, shift %d, windows %v: %s (%s, %v), want %s", tc.table, tc.count, tc.shift, tc.win, a, why, err, tc.want)
		}
	}
}

// TestAutoAlikeWithOrdinaryOutput: the same all-reduce on two ranks, a
// registered input and an ordinary output that is 16-byte aligned on one
// rank and 2 bytes off on the other: auto chooses the same path on both
// (it read the ordinary output's alignment, this rank's own fact, and sent
// one rank to the kernel and the other to NCCL: the gate failed the group).
func TestAutoAlikeWithOrdinaryOutput(t *testing.T) {
	var algos [2]coll.Algo
	for me := range 2 {
		g, _ := goldenGroup(t, goldenCfg{name: "rankalign", kern: true, ce: true, nccl: "full"}, 2, me)
		req := makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<20, false, "i", 0).req
		if me == 1 {
			req.Out.Ptr += 2
		}
		a, why, err := chooseReq(g, req, false)
		if err != nil {
			t.Fatalf("rank %d: %v", me, err)
		}
		t.Logf("rank %d: %s (%s)", me, a, why)
		algos[me] = a
	}
	if algos[0] != algos[1] {
		t.Errorf("one call, auto chose %s on rank 0 and %s on rank 1", algos[0], algos[1])
	}
}

// TestAutoLCInCapture: where a table names lc and the group's first lc call
// is being captured (lc cannot allocate its staging then), auto takes the
// next path instead of lc's refusal (auto never refuses a call).
func TestAutoLCInCapture(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "lccap", kern: true, ce: true, nccl: "full"}, 2, 0)
	user := &tune.Table{Format: tune.FormatVersion, Machine: builtinTable.Machine,
		Rows: []tune.Row{{Op: coll.ReduceScatter, Ranks: tune.Ranks{Min: 2, Max: 2}, Algo: coll.AlgoLowContention}}}
	if err := user.Validate(); err != nil {
		t.Fatal(err)
	}
	asked := 0
	g.b.table, g.x = user, captureExec{s: callerStream, asked: &asked}
	g.paths.lc.staging = nil // the group's first lc call
	req := rsReq(g, 64<<10)
	req.Algo, req.Stream = coll.AlgoAuto, callerStream
	p, err := g.Run(context.Background(), req)
	if err != nil || p.Algo == coll.AlgoLowContention {
		t.Errorf("auto in capture before lc's staging: %s, %v; want another path, no error", p.Algo, err)
	}
	g.paths.lc.staging = &segment{base: 0xC000_0000, size: lcStagingBytes} // made by an earlier call
	if p, err := g.Run(context.Background(), req); err != nil || p.Algo != coll.AlgoLowContention {
		t.Errorf("auto in capture with lc's staging: %s, %v; want lc", p.Algo, err)
	}
}
