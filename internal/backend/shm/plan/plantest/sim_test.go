package plantest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/reduce"
)

func randBytes(r *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// serialReduce is the reference: op over bufs in rank order, then Finish.
func serialReduce(t *testing.T, bufs [][]byte, dt coll.DType, op coll.ReduceOp) []byte {
	t.Helper()
	out := make([]byte, len(bufs[0]))
	if err := reduce.ReduceN(out, bufs, dt, op); err != nil {
		t.Fatal(err)
	}
	if err := reduce.Finish(out, dt, op, len(bufs)); err != nil {
		t.Fatal(err)
	}
	return out
}

// setup makes random buffers for the group and the expected Out of every
// rank (nil where only part of Out is defined: see check).
type groupCase struct {
	spec plan.Spec
	n    int
}

func (g groupCase) run(t *testing.T, r *rand.Rand, calls int, seed uint64) {
	g.runEpoch(t, r, calls, seed, 0)
}

func (g groupCase) runEpoch(t *testing.T, r *rand.Rand, calls int, seed uint64, epoch uint32) {
	t.Helper()
	s, n := g.spec, g.n
	plans := make([]plan.Plan, n)
	for q := range n {
		s.N, s.Rank = n, q
		p, err := plan.Build(s)
		if err != nil {
			t.Fatal(err)
		}
		plans[q] = p
	}
	es := int64(s.DType.Size())
	c := s.Count * es // AG/RS: per-rank bytes; AR/BC: total bytes
	bufs := make([]Buffers, n)
	for q := range n {
		bufs[q] = Buffers{In: randBytes(r, plans[q].InBytes), Out: randBytes(r, plans[q].OutBytes)}
	}
	orig := make([]Buffers, n)
	for q := range n {
		orig[q] = Buffers{In: bytes.Clone(bufs[q].In), Out: bytes.Clone(bufs[q].Out)}
	}
	// inputs[q] is rank q's logical input.
	inputs := make([][]byte, n)
	for q := range n {
		switch {
		case !s.InPlace:
			inputs[q] = orig[q].In
		case s.Kind == coll.AllGather:
			inputs[q] = orig[q].Out[int64(q)*c : int64(q+1)*c]
		default:
			inputs[q] = orig[q].Out
		}
	}
	if err := Simulate(plans, bufs, SimOptions{Calls: calls, Seed: seed, Epoch: epoch}); err != nil {
		t.Fatalf("Simulate: %v", err)
	}
	for q := range n {
		got := bufs[q].Out
		var want []byte
		switch s.Kind {
		case coll.AllGather:
			want = slices.Concat(inputs...)
		case coll.ReduceScatter:
			slices := make([][]byte, n)
			for p := range n {
				slices[p] = inputs[p][int64(q)*c : int64(q+1)*c]
			}
			red := serialReduce(t, slices, s.DType, s.Op)
			if s.InPlace { // only the own slice changes
				want = bytes.Clone(orig[q].Out)
				copy(want[int64(q)*c:], red)
			} else {
				want = red
			}
		case coll.AllReduce:
			want = serialReduce(t, inputs, s.DType, s.Op)
		case coll.Broadcast:
			want = orig[s.Root].Out
		case coll.AllToAll:
			for p := range n {
				want = append(want, inputs[p][int64(q)*c:int64(q+1)*c]...)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("rank %d: Out differs from the serial reference\n got % x\nwant % x", q, got, want)
		}
		if !s.InPlace && !bytes.Equal(bufs[q].In, orig[q].In) {
			t.Fatalf("rank %d: In was modified", q)
		}
	}
}

// TestSimulatedCorrectness runs every kind and variant for n = 2..8 with
// random odd counts and random data against a serial reference.
func TestSimulatedCorrectness(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	type kv struct {
		kind coll.Kind
		o    plan.Options
	}
	var kinds []kv
	for _, ip := range []bool{false, true} {
		for _, ch := range []int{1, 3} {
			kinds = append(kinds,
				kv{coll.AllGather, plan.Options{InPlace: ip, Chunks: ch}},
				kv{coll.ReduceScatter, plan.Options{InPlace: ip, Chunks: ch}},
				kv{coll.AllReduce, plan.Options{InPlace: ip, Chunks: ch}},
				kv{coll.AllReduce, plan.Options{InPlace: ip, Chunks: ch, OneShot: true}})
			if !ip {
				kinds = append(kinds, kv{coll.Broadcast, plan.Options{Chunks: ch}}, kv{coll.AllToAll, plan.Options{Chunks: ch}})
			}
		}
	}
	dtypes := []coll.DType{coll.Float32, coll.BFloat16, coll.Float16, coll.Int32, coll.Float64, coll.Int8}
	ops := []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max}
	cases := 0
	for n := 2; n <= 8; n++ {
		for _, k := range kinds {
			for _, count := range []int64{0, 1, int64(n) - 1, 13, int64(r.IntN(40) + 1)} {
				g := groupCase{n: n, spec: plan.Spec{Kind: k.kind, Count: count, DType: dtypes[r.IntN(len(dtypes))],
					Op: ops[r.IntN(len(ops))], Root: r.IntN(n), Options: k.o}}
				if k.kind != coll.Broadcast {
					g.spec.Root = 0
				}
				if k.kind != coll.ReduceScatter && k.kind != coll.AllReduce {
					g.spec.Op = coll.Sum
				}
				t.Run(fmt.Sprintf("n=%d/%v/inplace=%v/oneshot=%v/chunks=%d/count=%d/%v/%v", n, k.kind, k.o.InPlace,
					k.o.OneShot, k.o.Chunks, count, g.spec.DType, g.spec.Op), func(t *testing.T) {
					g.run(t, r, 1, r.Uint64())
				})
				cases++
			}
		}
	}
	t.Logf("%d simulated groups", cases)
}

// TestRepeatedCallsNoReset runs out-of-place plans several times back to back
// under random schedules: the epoch protocol must order call t+1 after call t
// with no reset of the signal words (ranks drift into the next call freely).
func TestRepeatedCallsNoReset(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
		for _, oneShot := range []bool{false, true} {
			if oneShot && k != coll.AllReduce {
				continue
			}
			for seed := range uint64(20) {
				n := 2 + r.IntN(6)
				g := groupCase{n: n, spec: plan.Spec{Kind: k, Count: 9, DType: coll.Float32, Op: coll.Sum,
					Root: r.IntN(n), Options: plan.Options{OneShot: oneShot}}}
				if k != coll.Broadcast {
					g.spec.Root = 0
				}
				// Half the runs start just below the 32-bit wrap of the epoch.
				g.runEpoch(t, r, 4, seed, uint32(seed%2)*(^uint32(0)-5))
			}
		}
	}
}

func buildGroup(t *testing.T, s plan.Spec, n int) []plan.Plan {
	t.Helper()
	return buildAll(t, s, n)
}

func remove(p plan.Plan, match func(plan.Step) bool) plan.Plan {
	p.Steps = slices.DeleteFunc(slices.Clone(p.Steps), match)
	return p
}

func groupBufs(plans []plan.Plan) []Buffers {
	b := make([]Buffers, len(plans))
	for i, p := range plans {
		b[i] = Buffers{In: make([]byte, p.InBytes), Out: make([]byte, p.OutBytes)}
	}
	return b
}

// TestCorruptedPlansAreCaught removes or reorders barrier steps and checks
// that Validate, ValidateGroup or Simulate reports it.
func TestCorruptedPlansAreCaught(t *testing.T) {
	ag := plan.Spec{Kind: coll.AllGather, Count: 4, DType: coll.Float32}
	ar := plan.Spec{Kind: coll.AllReduce, Count: 8, DType: coll.Float32, Op: coll.Sum}

	t.Run("missing ready wait: Validate", func(t *testing.T) {
		plans := buildGroup(t, ag, 3)
		bad := remove(plans[1], func(s plan.Step) bool { return s.Op == plan.Wait && s.Peer == 2 && s.Phase == 0 })
		err := plan.Validate(bad)
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "missing Wait") {
			t.Fatalf("Validate = %v", err)
		}
	})
	t.Run("ready wait after the reads: Validate", func(t *testing.T) {
		plans := buildGroup(t, ar, 2)
		p := plans[0]
		steps := slices.Clone(p.Steps)
		// Move the phase-0 wait after the reduce: the reduce reads rank 1 first.
		i := slices.IndexFunc(steps, func(s plan.Step) bool { return s.Op == plan.Wait && s.Phase == 0 })
		w := steps[i]
		steps = slices.Delete(steps, i, i+1)
		steps = slices.Insert(steps, i+1, w)
		p.Steps = steps
		if err := plan.Validate(p); !errors.Is(err, plan.ErrInvalid) {
			t.Fatalf("Validate = %v", err)
		}
	})
	t.Run("missing done barrier: ValidateGroup and Simulate", func(t *testing.T) {
		plans := buildGroup(t, ag, 3)
		// Rank 0 neither signals nor waits for phase 1: it may return
		// while peers still read its input.
		plans[0] = remove(plans[0], func(s plan.Step) bool { return s.Phase == 1 })
		// Validate alone notices that rank 0 never says its reads are done.
		if err := plan.Validate(plans[0]); !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "no later Signal") {
			t.Fatalf("Validate = %v", err)
		}
		if err := plan.ValidateGroup(plans); !errors.Is(err, plan.ErrInvalid) {
			t.Fatalf("ValidateGroup = %v", err)
		}
		// The simulator sees the race even without the static checks:
		// drop the matching waits on peers so the signal counts agree.
		for q := 1; q < 3; q++ {
			plans[q] = remove(plans[q], func(s plan.Step) bool { return s.Op == plan.Wait && s.Peer == 0 && s.Phase == 1 })
		}
		s := newSim(plans, groupBufs(plans), 1)
		err := runSim(s, 3, 7)
		if !errors.Is(err, ErrRace) {
			t.Fatalf("simulation = %v, want ErrRace", err)
		}
		t.Log(err)
	})
	t.Run("missing signal: deadlock", func(t *testing.T) {
		// A missing signal of an inner phase is covered by the next phase's
		// signal (waits are "greater or equal"); the last one is not.
		plans := buildGroup(t, ar, 3)
		plans[2] = remove(plans[2], func(s plan.Step) bool { return s.Op == plan.Signal && s.Peer == 0 && s.Phase == 2 })
		if err := plan.ValidateGroup(plans); !errors.Is(err, plan.ErrInvalid) {
			t.Fatalf("ValidateGroup = %v", err)
		}
		err := runSim(newSim(plans, groupBufs(plans), 1), 3, 1)
		if !errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("simulation = %v, want ErrDeadlock naming rank 0", err)
		}
		t.Log(err)
	})
	t.Run("in-place one-shot without scratch races", func(t *testing.T) {
		// The naive in-place one-shot (reduce straight into Out) overwrites
		// an input peers are still reading: the simulator must say so.
		plans := buildGroup(t, plan.Spec{Kind: coll.AllReduce, Count: 8, DType: coll.Float32, Op: coll.Sum,
			Options: plan.Options{InPlace: true, OneShot: true}}, 2)
		for q := range plans {
			var steps []plan.Step
			for _, s := range plans[q].Steps {
				if s.Op == plan.Copy {
					continue
				}
				if s.Op == plan.Reduce {
					s.Dst = plan.Ref{Buf: plan.Out, Rank: q}
				}
				steps = append(steps, s)
			}
			plans[q].Steps, plans[q].ScratchBytes = steps, 0
		}
		err := runSim(newSim(plans, groupBufs(plans), 1), 2, 3)
		if !errors.Is(err, ErrRace) {
			t.Fatalf("simulation = %v, want ErrRace", err)
		}
		t.Log(err)
	})
	t.Run("Validate rejects malformed steps", func(t *testing.T) {
		base := buildGroup(t, ar, 2)[0]
		for _, tc := range []struct {
			name string
			mut  func(*plan.Plan)
		}{
			{"write to peer", func(p *plan.Plan) { p.Steps[2].Dst.Rank = 1 }},
			{"out of bounds", func(p *plan.Plan) { p.Steps[2].Bytes = 1 << 20 }},
			{"misaligned", func(p *plan.Plan) { p.Steps[2].Dst.Off = 2 }},
			{"phase range", func(p *plan.Plan) { p.Steps[0].Phase = 7 }},
			{"signal self", func(p *plan.Plan) { p.Steps[0].Peer = 0 }},
			{"write In", func(p *plan.Plan) { p.Steps[2].Dst.Buf = plan.In }},
			{"peer scratch", func(p *plan.Plan) { p.Steps[2].Srcs[1].Buf = plan.Scratch }},
			{"phase repeats", func(p *plan.Plan) { p.Steps[3].Phase = 0 }},
			{"stage overlap", func(p *plan.Plan) {
				p.Steps = slices.Insert(p.Steps, 3, plan.Step{Op: plan.Copy, Srcs: []plan.Ref{{Buf: plan.In}}, Dst: plan.Ref{Buf: plan.Out}, Bytes: 4})
			}},
		} {
			p := base
			p.Steps = slices.Clone(base.Steps)
			for i := range p.Steps {
				p.Steps[i].Srcs = slices.Clone(p.Steps[i].Srcs)
			}
			tc.mut(&p)
			if err := plan.Validate(p); !errors.Is(err, plan.ErrInvalid) {
				t.Errorf("%s: Validate = %v", tc.name, err)
			} else {
				t.Logf("%s: %v", tc.name, err)
			}
		}
	})
}

// runSim drives a prepared simulator like Simulate, without ValidateGroup,
// so tests can feed it plans the static checks would reject.
func runSim(s *sim, n int, seed uint64) error {
	return s.run(n, rand.New(rand.NewPCG(seed, 1)))
}

// buildAll builds the plans of all n ranks for s and checks they match.
func buildAll(t *testing.T, s plan.Spec, n int) []plan.Plan {
	t.Helper()
	plans := make([]plan.Plan, n)
	for r := range n {
		s.N, s.Rank = n, r
		p, err := plan.Build(s)
		if err != nil {
			t.Fatalf("Build(%+v): %v", s, err)
		}
		plans[r] = p
	}
	if err := plan.ValidateGroup(plans); err != nil {
		t.Fatalf("ValidateGroup: %v", err)
	}
	return plans
}

// TestSimulatedAllToAllV runs split plans on random count matrices (zeros
// included, a rank sending nothing, everything to one rank) for n = 1..8,
// several calls back to back: every rank's Out must be its blocks from
// every rank in rank order, and no read may race.
func TestSimulatedAllToAllV(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for n := 1; n <= 8; n++ {
		for shape := range 4 {
			counts := make([][]int64, n)
			for i := range counts {
				counts[i] = make([]int64, n)
				for j := range counts[i] {
					switch {
					case shape == 1 && i == 0: // rank 0 sends nothing
					case shape == 2: // everything goes to the last rank
						if j == n-1 {
							counts[i][j] = int64(r.IntN(9))
						}
					case r.IntN(3) > 0:
						counts[i][j] = int64(r.IntN(9))
					}
				}
			}
			dt := []coll.DType{coll.Int8, coll.BFloat16, coll.Float32, coll.Float64}[shape]
			es := int64(dt.Size())
			plans := make([]plan.Plan, n)
			bufs := make([]Buffers, n)
			for q := range n {
				p, err := plan.AllToAllV(n, q, dt, counts, plan.Options{Chunks: 1 + shape%2*2})
				if err != nil {
					t.Fatal(err)
				}
				plans[q], bufs[q] = p, Buffers{In: randBytes(r, p.InBytes), Out: randBytes(r, p.OutBytes)}
			}
			orig := make([][]byte, n)
			for q := range n {
				orig[q] = bytes.Clone(bufs[q].In)
			}
			if err := Simulate(plans, bufs, SimOptions{Calls: 3, Seed: r.Uint64()}); err != nil {
				t.Fatalf("n=%d counts=%v: %v", n, counts, err)
			}
			for q := range n {
				var want []byte
				for i := range n {
					var off int64
					for j := range q {
						off += counts[i][j]
					}
					want = append(want, orig[i][off*es:(off+counts[i][q])*es]...)
				}
				if !bytes.Equal(bufs[q].Out, want) {
					t.Fatalf("n=%d counts=%v rank %d: Out % x, want % x", n, counts, q, bufs[q].Out, want)
				}
			}
		}
	}
}
