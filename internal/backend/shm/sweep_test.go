package shm_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
)

// sweepCase is one collective call.
type sweepCase struct {
	kind     coll.Kind
	dt       coll.DType
	op       coll.ReduceOp
	mode     string // sym, inplace, staged
	count    int    // per rank slice (all-gather, reduce-scatter), whole tensor otherwise
	root     int
	specials bool
	id       uint64
}

func (c sweepCase) String() string {
	return fmt.Sprintf("%v %v %v %s count=%d root=%d specials=%v id=%d", c.kind, c.dt, c.op, c.mode, c.count, c.root, c.specials, c.id)
}

// skew is the byte offset of the odd modes' spans into the buffers:
// misaligned for every dtype wider than a byte.
func (c sweepCase) skew() int {
	if c.mode == "odd" || c.mode == "odd-inplace" {
		return 1
	}
	return 0
}

type symBufs struct{ in, out symmem.Buffer }

func allocSym(ctx context.Context, g *symmem.Group, bytes int64) (symBufs, error) {
	sc, err := g.OpenScope()
	if err != nil {
		return symBufs{}, err
	}
	var b symBufs
	if b.in, err = sc.Alloc(bytes); err != nil {
		return b, err
	}
	if b.out, err = sc.Alloc(bytes); err != nil {
		return b, err
	}
	return b, sc.End(ctx)
}

// runSweepCase runs c on g and checks the result on this rank.
func runSweepCase(ctx context.Context, g *symmem.Group, b symBufs, c sweepCase) error {
	n, me, es := g.Size(), g.Rank(), c.dt.Size()
	var inN, outN int // elements
	switch c.kind {
	case coll.AllGather:
		inN, outN = c.count, n*c.count
	case coll.ReduceScatter:
		inN, outN = n*c.count, c.count
	default:
		inN, outN = c.count, c.count
	}
	var in, out []byte
	switch c.mode {
	case "sym", "odd":
		in, out = b.in.Bytes()[c.skew():][:inN*es], b.out.Bytes()[c.skew():][:outN*es]
	case "inplace", "odd-inplace":
		switch c.kind {
		case coll.AllGather:
			out = b.out.Bytes()[c.skew():][:outN*es]
			in = out[me*inN*es : (me+1)*inN*es]
		case coll.ReduceScatter:
			in = b.in.Bytes()[c.skew():][:inN*es]
			out = in[me*outN*es : (me+1)*outN*es]
		default:
			in = b.in.Bytes()[c.skew():][:inN*es]
			out = in
		}
	case "staged":
		in, out = make([]byte, inN*es), make([]byte, outN*es)
	case "staged-inplace":
		switch c.kind {
		case coll.AllGather:
			out = make([]byte, outN*es)
			in = out[me*inN*es : (me+1)*inN*es]
		case coll.ReduceScatter:
			in = make([]byte, inN*es)
			out = in[me*outN*es : (me+1)*outN*es]
		default:
			in = make([]byte, inN*es)
			out = in
		}
	}
	input := func(r, i int) elem { return value(c.dt, c.id, r, i, c.specials) }
	var err error
	switch c.kind {
	case coll.Broadcast:
		for i := range outN {
			if me == c.root {
				put(out, c.dt, i, input(c.root, i))
			} else {
				put(out, c.dt, i, input(me+100, i))
			}
		}
		_, err = g.Broadcast(ctx, symmem.HostSpan(out), c.root, c.dt)
	default:
		for i := range inN {
			put(in, c.dt, i, input(me, i))
		}
		switch c.kind {
		case coll.AllGather:
			_, err = g.AllGather(ctx, symmem.HostSpan(out), symmem.HostSpan(in), c.dt)
		case coll.ReduceScatter:
			_, err = g.ReduceScatter(ctx, symmem.HostSpan(out), symmem.HostSpan(in), c.dt, c.op)
		case coll.AllReduce:
			_, err = g.AllReduce(ctx, symmem.HostSpan(out), symmem.HostSpan(in), c.dt, c.op)
		}
	}
	runtime.KeepAlive(in)
	if err != nil {
		return fmt.Errorf("%v on group %q rank %d: %w", c, g.Name(), me, err)
	}
	vals := make([]elem, n)
	for i := range outN {
		var want elem
		switch c.kind {
		case coll.AllGather:
			want = input(i/c.count, i%c.count)
		case coll.Broadcast:
			want = input(c.root, i)
		case coll.ReduceScatter:
			for r := range n {
				vals[r] = input(r, me*c.count+i)
			}
			want = expect(c.dt, c.op, vals)
		case coll.AllReduce:
			for r := range n {
				vals[r] = input(r, i)
			}
			want = expect(c.dt, c.op, vals)
		}
		op := c.op
		if c.kind == coll.AllGather || c.kind == coll.Broadcast {
			op = coll.Sum
		}
		if msg, ok := same(c.dt, op, out, i, want); !ok {
			return fmt.Errorf("%v on group %q rank %d: element %d: %s", c, g.Name(), me, i, msg)
		}
	}
	return nil
}

func sweepOptions() symmem.Options {
	o := symmem.Options{Backend: "cpu", Timeout: 30 * time.Second, StagingBytes: 4 << 10}
	o.Pool.MinSegment = 8 << 20
	return o
}

// sweepCases is every kind x dtype x op x mode on counts around the vector
// width and the rank count, with and without special float values.
func sweepCases(n int, seed uint64) []sweepCase {
	var cs []sweepCase
	id := seed
	for _, dt := range coll.DTypes() {
		for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
			ops := []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max}
			if k == coll.AllGather || k == coll.Broadcast {
				ops = ops[:1]
			}
			for _, op := range ops {
				for _, mode := range []string{"sym", "inplace", "staged", "staged-inplace", "odd", "odd-inplace"} {
					if k == coll.Broadcast && (mode == "inplace" || mode == "odd-inplace" || mode == "staged-inplace") {
						continue
					}
					for _, count := range []int{0, 1, 3, 33, 257, 3001} {
						for _, sp := range []bool{false, true} {
							if sp && !isFloat(dt) {
								continue
							}
							id++
							cs = append(cs, sweepCase{kind: k, dt: dt, op: op, mode: mode, count: count, root: int(id) % n, specials: sp, id: id})
						}
					}
				}
			}
		}
	}
	return cs
}

func init() {
	procRoles["sweep"] = roleSweep
}

func roleSweep(ctx context.Context) error {
	w, err := symmem.Init(ctx, sweepOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	world := w.World()
	b, err := allocSym(ctx, world, 1<<20)
	if err != nil {
		return err
	}
	for _, c := range sweepCases(world.Size(), 1) {
		if err := runSweepCase(ctx, world, b, c); err != nil {
			return err
		}
	}
	return w.Close()
}

// TestCollectivesEveryCase: every collective x dtype x op x mode (symmetric,
// in place, staged, staged in place, spans misaligned by a byte) on counts
// 0..3001 (around the vector width and the rank count), with NaN, infinities
// and signed zeros among the float inputs, broadcast from every root, on 2
// and 3 ranks (real processes), checked against a serial reference.
func TestCollectivesEveryCase(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) { spawnRanks(t, n, "sweep") })
	}
}

func init() { procRoles["large"] = roleLarge }

// roleLarge: all-reduces past the one-shot sizes (two-shot, in place and
// out of place) and reduce-scatters of every dtype and op, with specials.
func roleLarge(ctx context.Context) error {
	w, err := symmem.Init(ctx, sweepOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	world := w.World()
	big, err := allocSym(ctx, world, 8<<20)
	if err != nil {
		return err
	}
	id := uint64(5000000)
	for _, dt := range coll.DTypes() {
		for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg, coll.Min, coll.Max} {
			for _, mode := range []string{"sym", "inplace", "odd-inplace"} {
				count := 40001
				if mode == "sym" {
					count = (1<<20)/dt.Size() + 3 // out of place past one-shot's 1 MiB
				}
				id++
				c := sweepCase{kind: coll.AllReduce, dt: dt, op: op, mode: mode, count: count, specials: isFloat(dt), id: id}
				if err := runSweepCase(ctx, world, big, c); err != nil {
					return err
				}
				c.kind, c.count = coll.ReduceScatter, count/world.Size()
				if err := runSweepCase(ctx, world, big, c); err != nil {
					return err
				}
			}
		}
	}
	return w.Close()
}

// TestCollectivesLarge: the two-shot all-reduce and large reduce-scatters
// of every dtype and op on 2 ranks.
func TestCollectivesLarge(t *testing.T) { spawnRanks(t, 2, "large") }

func init() {
	procRoles["groups"] = roleGroups
}

// roleGroups: 4 ranks; the world and subgroups of non-contiguous ranks
// ({0,2,3} and {1,3}) run sweeps at the same time on separate goroutines.
func roleGroups(ctx context.Context) error {
	w, err := symmem.Init(ctx, sweepOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	world := w.World()
	a, err := w.NewGroup(ctx, "a", []int{0, 2, 3})
	if err != nil {
		return err
	}
	bg, err := w.NewGroup(ctx, "b", []int{1, 3})
	if err != nil {
		return err
	}
	wb, err := allocSym(ctx, world, 1<<20)
	if err != nil {
		return err
	}
	ab, err := allocSym(ctx, a, 1<<20)
	if err != nil {
		return err
	}
	bb, err := allocSym(ctx, bg, 1<<20)
	if err != nil {
		return err
	}
	type job struct {
		g *symmem.Group
		b symBufs
		s uint64
	}
	jobs := []job{{world, wb, 1}}
	if a.IsMember() {
		jobs = append(jobs, job{a, ab, 100000})
	}
	if bg.IsMember() {
		jobs = append(jobs, job{bg, bb, 200000})
	}
	errc := make(chan error, len(jobs))
	for _, j := range jobs {
		go func() {
			for _, c := range sweepCases(j.g.Size(), j.s) {
				if err := runSweepCase(ctx, j.g, j.b, c); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range jobs {
		if err := <-errc; err != nil {
			return err
		}
	}
	return w.Close()
}

// TestConcurrentSubgroups: the world and two subgroups of non-contiguous
// ranks run the whole sweep at the same time on separate goroutines.
func TestConcurrentSubgroups(t *testing.T) { spawnRanks(t, 4, "groups") }

func init() {
	procRoles["sweep-small"] = func(ctx context.Context) error {
		w, err := symmem.Init(ctx, sweepOptions())
		if err != nil {
			return err
		}
		defer w.Close()
		b, err := allocSym(ctx, w.World(), 1<<20)
		if err != nil {
			return err
		}
		for _, c := range sweepCases(w.Size(), 7) {
			if c.count > 257 {
				continue
			}
			if err := runSweepCase(ctx, w.World(), b, c); err != nil {
				return err
			}
		}
		return w.Close()
	}
}

// TestCollectivesTenRanks: more sources than the reductions keep on the
// stack (8), counts up to 257.
func TestCollectivesTenRanks(t *testing.T) { spawnRanks(t, 10, "sweep-small") }
