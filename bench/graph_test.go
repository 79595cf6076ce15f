package bench

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
)

// graphRank is a fake rank that "captures" calls: a replay runs them.
type graphRank struct {
	*fakeRank
	replays, captured *atomic.Int64
}

type fakeGraph struct {
	r      graphRank
	calls  int
	run    func() error
	closed bool
}

func (g graphRank) Capture(calls int, k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (Graph, error) {
	g.captured.Add(int64(calls))
	return &fakeGraph{r: g, calls: calls, run: func() error {
		_, err := g.fakeRank.Run(k, out, in, count, dt, op, root, algo)
		return err
	}}, nil
}

func (g *fakeGraph) Replay() error {
	g.r.replays.Add(1)
	for range g.calls {
		if err := g.run(); err != nil {
			return err
		}
	}
	return nil
}
func (g *fakeGraph) Wait() error  { return nil }
func (g *fakeGraph) Close() error { g.closed = true; return nil }

// TestRunGraph: with -G the rows time graph replays of Graph calls each,
// still checked, and a target that cannot capture is refused up front.
func TestRunGraph(t *testing.T) {
	cfg := baseConfig()
	cfg.Graph, cfg.Iters, cfg.Budget = 4, 9, 0
	var replays, captured atomic.Int64
	reps := runGraphRanks(t, cfg, func(r *fakeRank) Target { return graphRank{r, &replays, &captured} })
	var measures int64
	for _, res := range reps[0].Results {
		for _, m := range res.measures() {
			measures++
			// 9 iterations of 4-call graphs: 2 replays (8 calls), 1 warmup replay.
			if m.Graph != 4 || m.Iters != 8 || m.Warmup != 4 || m.TimeUs <= 0 || m.Wrong != 0 {
				t.Errorf("%s %d: %+v", res.Op, res.Bytes, m)
			}
		}
	}
	if measures == 0 || replays.Load() != 2*measures*3 || captured.Load() != 2*measures*4 {
		t.Errorf("%d measures: %d replays (want %d), %d calls captured (want %d)", measures, replays.Load(), 2*measures*3, captured.Load(), 2*measures*4)
	}
	if _, err := runFake(2, cfg, 0); err == nil || !strings.Contains(err.Error(), "-G 4: the fake target cannot capture CUDA graphs") {
		t.Errorf("-G on a target without graphs: %v", err)
	}
}

// refusingGraphRank refuses to capture one algorithm on every rank, as a
// path with no graph support does.
type refusingGraphRank struct {
	graphRank
	algo coll.Algo
}

func (g refusingGraphRank) Capture(calls int, k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (Graph, error) {
	if algo == g.algo {
		return nil, fmt.Errorf("%s cannot be captured: %w", algo, errs.Refused)
	}
	return g.graphRank.Capture(calls, k, out, in, count, dt, op, root, algo)
}

// TestRunGraphRefused: an algorithm every rank refuses to capture gives
// refused rows with the reason, and the sweep measures the others (a
// `symmem tune -G` goes on).
func TestRunGraphRefused(t *testing.T) {
	cfg := baseConfig()
	cfg.Graph, cfg.Iters, cfg.Budget = 4, 9, 0
	cfg.Algos = []coll.Algo{coll.AlgoKernel, coll.AlgoNCCL}
	var replays, captured atomic.Int64
	reps := runGraphRanks(t, cfg, func(r *fakeRank) Target {
		return refusingGraphRank{graphRank{r, &replays, &captured}, coll.AlgoNCCL}
	})
	timed, refused := 0, 0
	for _, res := range reps[0].Results {
		for _, m := range res.measures() {
			switch {
			case res.Algo == string(coll.AlgoNCCL) && m.Path == "refused" && strings.Contains(m.Refused, "in a CUDA graph: nccl cannot be captured"):
				refused++
			case res.Algo == string(coll.AlgoKernel) && m.TimeUs > 0 && m.Graph == 4:
				timed++
			default:
				t.Errorf("%s %s %d: %+v", res.Algo, res.Op, res.Bytes, m)
			}
		}
	}
	if timed == 0 || refused == 0 {
		t.Errorf("%d timed and %d refused graph measures, want both", timed, refused)
	}
}

// runGraphRanks runs cfg on two fake ranks, each the target rank makes of
// its fake rank, and returns their reports (a rank's error fails t).
func runGraphRanks(t *testing.T, cfg Config, rank func(*fakeRank) Target) []*Report {
	t.Helper()
	j := newFakeJob(2)
	reps := make([]*Report, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() { reps[r], errs[r] = Run(rank(j.ranks[r]), cfg) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reps
}
