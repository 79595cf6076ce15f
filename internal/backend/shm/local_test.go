package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/internal/backend/shm/plan/plantest"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// localGroup is an n-rank group inside one process: every rank has its own
// Group with a signal pad (memfd, mapped by the others as peers map it) and
// In and Out buffers in memfd memory, and the ranks run as goroutines. It
// drives the executor (execute, the crew, the pads) on real shared memory
// without starting processes; the root package's tests cover processes.
type localGroup struct {
	gs      []*Group
	in, out *peerSeg
	inMem   [][]byte // by rank
	outMem  [][]byte
}

func newLocalGroup(tb testing.TB, n int, bytes int64, s split) *localGroup {
	tb.Helper()
	lg := &localGroup{gs: make([]*Group, n)}
	ps := make([]*pads, n)
	for r := range ps {
		p, err := newPads(n, r)
		if err != nil {
			tb.Fatal(err)
		}
		ps[r] = p
	}
	for r, p := range ps {
		for q := range ps {
			if q != r {
				m, err := mapPeer(ps[q].fd, padSize(n))
				if err != nil {
					tb.Fatal(err)
				}
				p.peers[q] = m
			}
		}
	}
	seg := func() (*peerSeg, [][]byte) {
		ps := &peerSeg{size: bytes, bases: make([]uint64, n)}
		mems := make([][]byte, n)
		for r := range mems {
			fd, m, err := newShared("symmem-test", bytes)
			if err != nil {
				tb.Fatal(err)
			}
			unix.Close(fd)
			mems[r], ps.bases[r] = m, hostmem.Addr(m)
		}
		return ps, mems
	}
	lg.in, lg.inMem = seg()
	lg.out, lg.outMem = seg()
	ranks := make([]int, n)
	for r := range ranks {
		ranks[r] = r
	}
	for r := range lg.gs {
		lg.gs[r] = &Group{Head: members.Head{GroupName: "local", Ranks: ranks, Me: r, Timeout: 10 * time.Second}, crew: newCrew(s),
			pidfds: make([]int, n), pids: make([]int, n), pads: ps[r], plans: map[plan.Spec]plan.Plan{}}
		for q := range n {
			lg.gs[r].pidfds[q] = -1
		}
	}
	tb.Cleanup(func() {
		for _, g := range lg.gs {
			g.crew.stop()
		}
		for _, p := range ps {
			p.close()
		}
		for _, m := range append(lg.inMem, lg.outMem...) {
			unix.Munmap(m)
		}
	})
	return lg
}

// plans builds every rank's plan for spec.
func (lg *localGroup) plans(spec plan.Spec) ([]plan.Plan, error) {
	out := make([]plan.Plan, len(lg.gs))
	for r := range out {
		spec.N, spec.Rank = len(lg.gs), r
		p, err := plan.Build(spec)
		if err != nil {
			return nil, err
		}
		out[r] = p
	}
	return out, nil
}

// run executes plans (one per rank) on every rank at once, as Group.Run
// does after its checks: execute, then advance the epoch.
func (lg *localGroup) run(plans []plan.Plan) error { return lg.loop(plans, 1) }

// loop is run, calls times back to back on each rank.
func (lg *localGroup) loop(plans []plan.Plan, calls int) error {
	errs := make([]error, len(lg.gs))
	var wg sync.WaitGroup
	for r, g := range lg.gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := plans[r]
			for range calls {
				x := &g.x
				*x = exec{p: p, ctx: context.Background(), deadline: time.Now().Add(g.Timeout), in: lg.in, out: lg.out}
				if p.ScratchBytes > 0 {
					if int64(len(g.scratch)) < p.ScratchBytes {
						g.scratch = make([]byte, p.ScratchBytes)
					}
					x.scratch = g.scratch[:p.ScratchBytes]
				}
				if errs[r] = g.execute(x); errs[r] != nil {
					return
				}
				g.epoch += uint32(p.Phases)
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}

// TestLocalGroupMatchesSimulation runs plans of every kind on the executor
// (the inline path and the worker path with small pieces) and compares
// every rank's output byte for byte with plantest's simulation of the same
// plans on the same inputs (itself checked against a serial reduction):
// rank-order reductions give identical bytes however the work is split.
func TestLocalGroupMatchesSimulation(t *testing.T) {
	const cap = 1 << 20
	splits := []split{
		{workers: 1},
		{workers: 4, minPiece: 64}, // every stage cut into pieces, several workers
	}
	specs := []plan.Spec{
		{Kind: coll.AllGather, Count: 1001, DType: coll.BFloat16},
		{Kind: coll.AllGather, Count: 777, DType: coll.Int8, Options: plan.Options{InPlace: true}},
		{Kind: coll.ReduceScatter, Count: 1003, DType: coll.Float16, Op: coll.Avg},
		{Kind: coll.ReduceScatter, Count: 999, DType: coll.Float32, Op: coll.Max, Options: plan.Options{InPlace: true}},
		{Kind: coll.AllReduce, Count: 10007, DType: coll.BFloat16, Op: coll.Sum},
		{Kind: coll.AllReduce, Count: 10007, DType: coll.Float32, Op: coll.Avg, Options: plan.Options{InPlace: true}},
		{Kind: coll.AllReduce, Count: 4099, DType: coll.Float16, Op: coll.Sum, Options: plan.Options{OneShot: true}},
		{Kind: coll.AllReduce, Count: 4097, DType: coll.Float64, Op: coll.Min, Options: plan.Options{OneShot: true, InPlace: true}},
		{Kind: coll.AllReduce, Count: 3001, DType: coll.Int32, Op: coll.Sum, Options: plan.Options{OneShot: true}},
		{Kind: coll.Broadcast, Count: 2049, DType: coll.Float32, Root: 1},
	}
	rng := rand.New(rand.NewPCG(16, 16))
	for _, n := range []int{2, 3} {
		for _, s := range splits {
			lg := newLocalGroup(t, n, cap, s)
			for _, spec := range specs {
				name := fmt.Sprintf("n%d/w%d/%v-%v-%v-inplace%v-oneshot%v", n, s.workers, spec.Kind, spec.DType, spec.Op, spec.InPlace, spec.OneShot)
				plans, err := lg.plans(spec)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				bufs := make([]plantest.Buffers, n)
				for r, p := range plans {
					in, out := lg.inMem[r][:p.InBytes], lg.outMem[r][:p.OutBytes]
					for i := range in {
						in[i] = byte(rng.Uint32())
					}
					for i := range out {
						out[i] = byte(rng.Uint32())
					}
					bufs[r] = plantest.Buffers{In: bytes.Clone(in), Out: bytes.Clone(out)}
				}
				if err := plantest.Simulate(plans, bufs, plantest.SimOptions{}); err != nil {
					t.Fatalf("%s: simulation: %v", name, err)
				}
				if err := lg.run(plans); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for r, p := range plans {
					if !bytes.Equal(lg.outMem[r][:p.OutBytes], bufs[r].Out) {
						t.Errorf("%s: rank %d: Out differs from the simulation", name, r)
					}
					if !bytes.Equal(lg.inMem[r][:p.InBytes], bufs[r].In) {
						t.Errorf("%s: rank %d: In was modified", name, r)
					}
				}
			}
		}
	}
}

// BenchmarkLocal times all-reduce (float32 sum, out of place and in
// place) and all-gather on a 2-rank in-process group, every variant side by
// side in one run: the plans (one-shot, two-shot) and the ways of sharing a
// stage among goroutines:
//
//	one-core  the caller alone below 4 MiB, 2 MiB pieces above, helpers
//	          asleep between stages, waits that poll 20 us (the executor
//	          before issue 16)
//	sleep     splitFor's pieces, helpers asleep between stages, waits that
//	          poll 20 us
//	crew      splitFor's pieces, helpers and waits that poll 200 us (the
//	          default with a CPU per rank)
//
// The bytes per second are nccl-tests' algbw (size of the full tensor /
// time); busbw is algbw for all-reduce and algbw/2 for all-gather with 2
// ranks. Ranks are goroutines of one process, so they share one Go
// scheduler: the absolute numbers differ a little from separate
// processes, the comparison between variants holds. On a 2-CPU host every
// variant has one worker, so they differ only by noise.
//
//	go test ./internal/backend/shm -run '^$' -bench Local
func BenchmarkLocal(b *testing.B) {
	const n = 2
	cur := splitFor(n)
	sleep := cur
	sleep.spin = 0
	splits := []struct {
		name string
		s    split
		wait time.Duration
	}{
		{"one-core", split{workers: cur.workers, inline: 4 << 20, minPiece: maxPiece}, 20 * time.Microsecond},
		{"sleep", sleep, 20 * time.Microsecond},
		{"crew", cur, waitSpin(n)},
	}
	sizes := []int64{256 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20}
	lgs := map[string]*localGroup{}
	for _, sp := range splits {
		lg := newLocalGroup(b, n, sizes[len(sizes)-1], sp.s)
		for _, g := range lg.gs {
			g.pads.spin = sp.wait
		}
		lgs[sp.name] = lg
	}
	for _, size := range sizes {
		for _, c := range []struct {
			name string
			spec plan.Spec
		}{
			{"all_reduce/two-shot", plan.Spec{Kind: coll.AllReduce, Count: size / 4, DType: coll.Float32, Op: coll.Sum}},
			{"all_reduce/one-shot", plan.Spec{Kind: coll.AllReduce, Count: size / 4, DType: coll.Float32, Op: coll.Sum, Options: plan.Options{OneShot: true}}},
			{"all_reduce-inplace/two-shot", plan.Spec{Kind: coll.AllReduce, Count: size / 4, DType: coll.Float32, Op: coll.Sum, Options: plan.Options{InPlace: true}}},
			{"all_reduce-inplace/one-shot", plan.Spec{Kind: coll.AllReduce, Count: size / 4, DType: coll.Float32, Op: coll.Sum, Options: plan.Options{InPlace: true, OneShot: true}}},
			{"all_gather", plan.Spec{Kind: coll.AllGather, Count: size / 4 / n, DType: coll.Float32}},
		} {
			for _, sp := range splits {
				lg := lgs[sp.name]
				b.Run(fmt.Sprintf("%s/%s/%s", c.name, sizeName(size), sp.name), func(b *testing.B) {
					plans, err := lg.plans(c.spec)
					if err != nil {
						b.Fatal(err)
					}
					if err := lg.loop(plans, 3); err != nil { // warm: pages touched, goroutines started
						b.Fatal(err)
					}
					b.SetBytes(size)
					b.ResetTimer()
					if err := lg.loop(plans, b.N); err != nil {
						b.Fatal(err)
					}
				})
			}
		}
	}
}

func sizeName(b int64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%dM", b>>20)
	}
	return fmt.Sprintf("%dK", b>>10)
}

// BenchmarkLocalBarrier times the synchronisation of one call alone: an
// all-gather of one element per rank on 2 ranks is two signal rounds
// (inputs ready, reads done) around an 8-byte copy. "poll-Nus" is how long
// a wait polls before it sleeps on the futex; poll-0us sleeps whenever the
// peer is not there yet, which shows what a futex sleep and wake cost.
func BenchmarkLocalBarrier(b *testing.B) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond, 200 * time.Microsecond} {
		b.Run(fmt.Sprintf("poll-%dus", spin.Microseconds()), func(b *testing.B) {
			lg := newLocalGroup(b, 2, 4096, split{workers: 1})
			for _, g := range lg.gs {
				g.pads.spin = spin
			}
			plans, err := lg.plans(plan.Spec{Kind: coll.AllGather, Count: 1, DType: coll.Float32})
			if err != nil {
				b.Fatal(err)
			}
			if err := lg.loop(plans, 10); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			if err := lg.loop(plans, b.N); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestExecuteNoAllocs: a call's execution allocates nothing in steady
// state, with the crew sharing its stages (2 ranks, 2 workers each, every
// stage cut into pieces): thousands of calls a second must not feed the
// GC, whose cycles take CPUs from the copies.
func TestExecuteNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const n, runs = 2, 20
	lg := newLocalGroup(t, n, 1<<20, split{workers: 2, minPiece: 64, spin: 200 * time.Microsecond})
	for _, spec := range []plan.Spec{
		{Kind: coll.AllGather, Count: 10001, DType: coll.Float32},
		{Kind: coll.AllReduce, Count: 20001, DType: coll.BFloat16, Op: coll.Sum},
		{Kind: coll.AllReduce, Count: 20001, DType: coll.Float32, Op: coll.Avg, Options: plan.Options{OneShot: true}},
		{Kind: coll.AllReduce, Count: 20001, DType: coll.Float16, Op: coll.Max, Options: plan.Options{InPlace: true}},
	} {
		plans, err := lg.plans(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := lg.loop(plans, 3); err != nil {
			t.Fatal(err)
		}
		call := func(r int) error {
			g := lg.gs[r]
			x := &g.x
			*x = exec{p: plans[r], ctx: context.Background(), deadline: time.Now().Add(g.Timeout), in: lg.in, out: lg.out}
			if err := g.execute(x); err != nil {
				return err
			}
			g.epoch += uint32(plans[r].Phases)
			return nil
		}
		peer := make(chan error, 1)
		go func() { // rank 1: as many calls as AllocsPerRun makes (runs + a warm-up)
			for range runs + 1 {
				if err := call(1); err != nil {
					peer <- err
					return
				}
			}
			peer <- nil
		}()
		var err0 error
		allocs := testing.AllocsPerRun(runs, func() {
			if err := call(0); err != nil && err0 == nil {
				err0 = err
			}
		})
		if err := errors.Join(err0, <-peer); err != nil {
			t.Fatalf("%v %v: %v", spec.Kind, spec.DType, err)
		}
		if allocs != 0 {
			t.Errorf("%v %v %v in-place=%v one-shot=%v: %v allocations per call, want 0", spec.Kind, spec.DType, spec.Op, spec.InPlace, spec.OneShot, allocs)
		}
	}
}
