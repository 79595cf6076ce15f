package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/symmem/symmem/coll"
)

// fakeOverlap adds a deterministic timing model to a fake rank: a GEMM
// takes gemmMs, a collective commMs[algo]; overlapped, an iteration takes
// max(GEMMs, collectives) + penalty[algo]·collectives, and the GEMMs end at
// GEMMs + penalty·collectives. Collectives really run (fakeRank.Run), so
// the harness's check sees real data.
type fakeOverlap struct {
	*fakeRank
	gemmMs  float64
	commMs  map[coll.Algo]float64
	penalty map[coll.Algo]float64
	setup   GEMMShape
	trials  map[Mode]int
	mu      sync.Mutex
	board   [][]float64 // shared by the ranks: ExchangeFloat64's slots
}

// ExchangeFloat64 shares values through memory (the fake's collectives may
// be corrupted on purpose; the harness's bookkeeping must not be).
func (f *fakeOverlap) ExchangeFloat64(vals []float64) ([][]float64, error) {
	f.job.barrier()
	f.job.mu.Lock()
	f.board[f.rank] = append([]float64(nil), vals...)
	f.job.mu.Unlock()
	f.job.barrier()
	f.job.mu.Lock()
	out := make([][]float64, len(f.board))
	for r, v := range f.board {
		out[r] = append([]float64(nil), v...)
	}
	f.job.mu.Unlock()
	f.job.barrier()
	return out, nil
}

func (f *fakeOverlap) Algos(k coll.Kind) []coll.Algo {
	return []coll.Algo{coll.AlgoDirect, coll.AlgoKernel}
}

func (f *fakeOverlap) SetupGEMM(s GEMMShape) error { f.setup = s; return nil }

func (f *fakeOverlap) Trial(tr Trial) (TrialTimes, error) {
	f.mu.Lock()
	f.trials[tr.Mode]++
	f.mu.Unlock()
	var tt TrialTimes
	calls := 0
	if tr.Mode != GEMMOnly {
		calls = tr.Calls
	}
	for i := 0; i < tr.Iters*calls; i++ {
		c := tr.Call
		p, err := f.Run(c.K, c.Out, c.In, c.Count, c.DType, c.Op, 0, c.Algo)
		if err != nil {
			return tt, err
		}
		tt.Path = p
	}
	g := float64(tr.GEMMs) * f.gemmMs
	if tr.Mode == CommOnly {
		g = 0
	}
	c := float64(calls) * f.commMs[tr.Call.Algo]
	pen := f.penalty[tr.Call.Algo] * c
	per := g + c // sequential (and one-sided)
	gEnd := g
	if tr.Mode == Overlapped {
		per, gEnd = max(g+pen, c), g+pen
	}
	it := float64(tr.Iters)
	tt.Total = per * it
	if g > 0 {
		tt.GEMM = (it-1)*per + gEnd
	}
	if c > 0 {
		tt.Comm = tt.Total
	}
	return tt, nil
}

func runOverlapFake(t *testing.T, n int, cfg OverlapConfig, setup func(*fakeJob)) ([]*fakeOverlap, *OverlapReport, error) {
	t.Helper()
	j := newFakeJob(n)
	if setup != nil {
		setup(j)
	}
	fs := make([]*fakeOverlap, n)
	board := make([][]float64, n)
	for r := range fs {
		fs[r] = &fakeOverlap{fakeRank: j.ranks[r], gemmMs: 1.5, board: board,
			commMs:  map[coll.Algo]float64{coll.AlgoAuto: 2, coll.AlgoDirect: 2, coll.AlgoKernel: 4},
			penalty: map[coll.Algo]float64{coll.AlgoAuto: 0.05, coll.AlgoDirect: 0.05, coll.AlgoKernel: 0.5},
			trials:  map[Mode]int{}}
	}
	reps := make([]*OverlapReport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range fs {
		wg.Go(func() { reps[r], errs[r] = RunOverlap(fs[r], cfg) })
	}
	wg.Wait()
	return fs, reps[0], errors.Join(errs...)
}

func smallOverlap() OverlapConfig {
	return OverlapConfig{GEMM: GEMMShape{64, 32, 16}, GEMMs: 20, Ops: []coll.Kind{coll.AllGather}, Bytes: 64 << 10, DType: coll.BFloat16,
		RedOp: coll.Sum, Calls: 5, Warmup: 1, Reps: 3, FSDP: true, FSDPRank: 16 << 10, FSDPIter: 4, Seed: 7}
}

func TestOverlapModel(t *testing.T) {
	for _, op := range []coll.Kind{coll.AllGather, coll.ReduceScatter} {
		t.Run(op.String(), func(t *testing.T) {
			cfg := smallOverlap()
			cfg.Ops = []coll.Kind{op}
			fs, rep, err := runOverlapFake(t, 3, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fs[1].setup != cfg.GEMM {
				t.Errorf("SetupGEMM got %+v", fs[1].setup)
			}
			// Algorithms: auto, then the target's own list, in order.
			var algos []string
			for _, r := range rep.Cases[0].Rows {
				algos = append(algos, r.Algo)
			}
			if strings.Join(algos, ",") != "auto,direct,kernel" {
				t.Errorf("algorithms %v, want auto,direct,kernel", algos)
			}
			// GEMM 20×1.5 = 30 ms; direct: 5×2 = 10 ms, together max(30+0.5, 10) = 30.5.
			d := rep.Cases[0].Rows[1]
			near := func(name string, got, want float64) {
				if math.Abs(got-want) > 1e-9 {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			near("gemm_ms", d.GEMMMs, 30)
			near("comm_ms", d.CommMs, 10)
			near("together_ms", d.BothMs, 30.5)
			near("hidden", d.Hidden, (30+10-30.5)/10)
			near("slowdown", d.Slowdown, 30.5/30-1)
			k := rep.Cases[0].Rows[2] // 20 ms of comm, penalty 10 ms
			near("kernel hidden", k.Hidden, (30+20-40)/20.0)
			for _, r := range rep.Cases[0].Rows {
				if r.Wrong != 0 || r.Path != "direct" || len(r.Raw.Both) != cfg.Reps {
					t.Errorf("row %+v: want 0 wrong, path direct, %d reps", r, cfg.Reps)
				}
			}
			// FSDP: per iteration GEMM 1.5, comm 2; sequential 3.5, overlapped max(1.6, 2) = 2.
			if len(rep.FSDP) != 3 {
				t.Fatalf("%d FSDP rows, want 3", len(rep.FSDP))
			}
			f := rep.FSDP[1]
			near("fsdp sequential", f.Sequential, 3.5)
			near("fsdp overlapped", f.Overlapped, 2)
			near("fsdp speedup", f.Speedup, 1.75)
			near("fsdp hidden", f.Hidden, 0.75)
			// Every measurement had its warm-up and repetitions.
			if got := fs[0].trials[Sequential]; got != 3*(cfg.Warmup+cfg.Reps) {
				t.Errorf("%d sequential trials, want %d", got, 3*(cfg.Warmup+cfg.Reps))
			}
		})
	}
}

func TestOverlapRefusedAndWrong(t *testing.T) {
	cfg := smallOverlap()
	cfg.FSDP = false
	_, rep, err := runOverlapFake(t, 2, cfg, func(j *fakeJob) { j.refuseOver = 1 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	k := rep.Cases[0].Rows[2]
	if k.Algo != "kernel" || k.Refused == "" || k.Path != "refused" {
		t.Errorf("kernel row %+v, want refused", k)
	}
	var tb bytes.Buffer
	if err := WriteOverlapTable(&tb, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"kernel refused:", "Out of bounds values : 0 OK", "hidden", "gemm_slow"} {
		if !strings.Contains(tb.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, tb.String())
		}
	}
	// A corrupted result is counted (rank 0 flips 3 elements per call).
	cfg.Algos = []coll.Algo{coll.AlgoDirect}
	_, rep, err = runOverlapFake(t, 2, cfg, func(j *fakeJob) { j.corrupt = 3 })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cases[0].Rows[0].Wrong != 3 || rep.WrongTotal() != 3 {
		t.Errorf("corrupted collective: %d wrong (total %d), want 3", rep.Cases[0].Rows[0].Wrong, rep.WrongTotal())
	}
}

func TestOverlapReportOutput(t *testing.T) {
	cfg := smallOverlap()
	cfg.Algos = []coll.Algo{coll.AlgoDirect}
	_, rep, err := runOverlapFake(t, 2, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 1 || len(rep.Cases[0].Rows) != 1 || len(rep.FSDP) != 1 {
		t.Fatalf("rows %d, fsdp %d: want 1 each (--algo given)", len(rep.Cases[0].Rows), len(rep.FSDP))
	}
	var tb, jb bytes.Buffer
	if err := WriteOverlapTable(&tb, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(tb.String(), "\n")
	var data []string
	for _, l := range lines {
		if strings.HasPrefix(l, "  ") {
			data = append(data, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"direct direct 30.00 10.00 30.50 30.50 95.0% 1.7% 0.0 0",
		"direct direct 1.500 2.000 3.500 2.000 1.75x 75.0% 0",
	}
	if strings.Join(data, "\n") != strings.Join(want, "\n") {
		t.Errorf("data rows:\n%s\nwant:\n%s\nfull table:\n%s", strings.Join(data, "\n"), strings.Join(want, "\n"), tb.String())
	}
	if err := WriteOverlapJSON(&jb, rep); err != nil {
		t.Fatal(err)
	}
	var back OverlapReport
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Kind != "overlap" || back.Cases[0].Rows[0].Hidden != rep.Cases[0].Rows[0].Hidden || len(back.Cases[0].Rows[0].Raw.GEMM) != cfg.Reps {
		t.Errorf("JSON round trip lost data: %+v", back.Cases[0].Rows[0])
	}
}

func TestOverlapValidate(t *testing.T) {
	bad := []struct {
		f    func(*OverlapConfig)
		want string
	}{
		{func(c *OverlapConfig) { c.GEMM.K = 0 }, "positive"},
		{func(c *OverlapConfig) { c.GEMM.M = 1 << 31 }, "2^31"},
		{func(c *OverlapConfig) { c.GEMMs = 0 }, "--gemms"},
		{func(c *OverlapConfig) { c.Calls = 0 }, "--calls"},
		{func(c *OverlapConfig) { c.Ops = []coll.Kind{coll.AllGather, coll.Broadcast} }, "want all_gather"},
		{func(c *OverlapConfig) { c.Ops = nil }, "no ops"},
		{func(c *OverlapConfig) { c.Reps = 0 }, "--reps"},
		{func(c *OverlapConfig) { c.Warmup = -1 }, "warmup"},
		{func(c *OverlapConfig) { c.FSDPIter = 0 }, "FSDP"},
		{func(c *OverlapConfig) { c.Bytes = 2 }, "below one"},
	}
	for _, b := range bad {
		c := smallOverlap()
		b.f(&c)
		if err := c.Validate(4); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Validate = %v, want an error mentioning %q", err, b.want)
		}
	}
	c := smallOverlap()
	if err := c.Validate(4); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

func TestMedianHidden(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Errorf("median odd = %v", m)
	}
	v := []float64{4, 1, 3, 2}
	if m := median(v); m != 2.5 || v[0] != 4 {
		t.Errorf("median even = %v (input %v must stay unsorted)", m, v)
	}
	if h := Hidden(30, 10, 30); h != 1 {
		t.Errorf("fully hidden = %v", h)
	}
	if h := Hidden(30, 10, 40); h != 0 {
		t.Errorf("not hidden = %v", h)
	}
	if h := Hidden(30, 0, 30); h != 0 {
		t.Errorf("no comm = %v", h)
	}
}

// TestOverlapTwoOps: one case per op, each checked with its own data, and
// the FSDP case once (all-gather).
func TestOverlapTwoOps(t *testing.T) {
	cfg := smallOverlap()
	cfg.Ops = []coll.Kind{coll.AllGather, coll.ReduceScatter}
	_, rep, err := runOverlapFake(t, 2, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 2 || rep.Cases[0].Op != "all_gather" || rep.Cases[1].Op != "reduce_scatter" || rep.Cases[1].RedOp != "sum" {
		t.Fatalf("cases %+v", rep.Cases)
	}
	if len(rep.FSDP) != 3 || rep.WrongTotal() != 0 {
		t.Errorf("fsdp rows %d, wrong %d", len(rep.FSDP), rep.WrongTotal())
	}
	var tb bytes.Buffer
	if err := WriteOverlapTable(&tb, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tb.String(), "# reduce_scatter sum 64K") {
		t.Errorf("table lacks the reduce-scatter case:\n%s", tb.String())
	}
}
