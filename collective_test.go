package symmem

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

func init() {
	roles["matrix"] = roleMatrix
}

func TestCollectives(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			t.Parallel()
			before := shmFiles(t)
			expectOK(t, spawn(t, n, "matrix"))
			noNewShm(t, before)
		})
	}
}

// testOptions are the options of every child: short timeouts, small
// segments and a small staging buffer (so staging runs several rounds).
func testOptions() Options {
	o := Options{Timeout: 20 * time.Second, StagingBytes: 64 << 10, Checked: os.Getenv("SYMMEM_TEST_CHECKED") == "1"}
	o.Pool.MinSegment = 8 << 20
	return o
}

// bufs is a pair of symmetric buffers allocated on every rank (members or
// not, to keep the pools identical).
type bufs struct{ in, out Buffer }

func allocBufs(ctx context.Context, g *Group, bytes int64) (bufs, error) {
	sc, err := g.OpenScope()
	if err != nil {
		return bufs{}, err
	}
	var b bufs
	if b.in, err = sc.Alloc(bytes); err != nil {
		return b, err
	}
	if b.out, err = sc.Alloc(bytes); err != nil {
		return b, err
	}
	return b, sc.End(ctx)
}

const (
	smallCount = 257   // per-rank elements of the matrix (odd on purpose)
	bigCount   = 300e3 // per-rank elements of the large cases (worker path)
)

func roleMatrix(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	n := w.Size()
	world := w.World()
	wb, err := allocBufs(ctx, world, int64(n)*bigCount*8)
	if err != nil {
		return err
	}
	if err := runMatrix(ctx, world, wb, 1); err != nil {
		return err
	}
	if n == 4 {
		// Two subgroups sharing the one pool with the world, run at once.
		a, err := w.NewGroup(ctx, "even", []int{0, 2})
		if err != nil {
			return err
		}
		b, err := w.NewGroup(ctx, "odd", []int{3, 1})
		if err != nil {
			return err
		}
		ab, err := allocBufs(ctx, a, 2*bigCount*8)
		if err != nil {
			return err
		}
		bb, err := allocBufs(ctx, b, 2*bigCount*8)
		if err != nil {
			return err
		}
		mine, mb := a, ab
		if !a.IsMember() {
			mine, mb = b, bb
		}
		if a.IsMember() == b.IsMember() {
			return fmt.Errorf("rank %d: member of even=%v odd=%v", w.Rank(), a.IsMember(), b.IsMember())
		}
		if err := runMatrix(ctx, mine, mb, 1000); err != nil {
			return err
		}
		// The world's buffers still work after the subgroups used the pool.
		if err := runCase(ctx, world, coll.AllReduce, coll.Float32, coll.Sum, "sym", smallCount, wb, 5000); err != nil {
			return err
		}
		// One pool per process serves the world and this rank's subgroup.
		if err := endEmpty(ctx, world); err != nil {
			return err
		}
		if err := endEmpty(ctx, mine); err != nil {
			return err
		}
		st := w.pool.Stats()
		if len(st.Groups) != 2 || st.Groups[0].Name != "world" || st.Groups[1].Name != mine.Name() {
			return fmt.Errorf("pool groups %+v, want world and %s sharing it", st.Groups, mine.Name())
		}
		for _, gs := range st.Groups {
			if gs.Registered != st.Segments {
				return fmt.Errorf("group %s registered %d of the pool's %d segments", gs.Name, gs.Registered, st.Segments)
			}
		}
		if err := w.Free(ab.in); err != nil {
			return err
		}
		if err := w.Free(ab.out); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return noMemfd()
}

// endEmpty opens and ends a scope: registers segments the group lacks.
func endEmpty(ctx context.Context, g *Group) error {
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	return sc.End(ctx)
}

// runMatrix runs every op × dtype × redop × mode on g.
func runMatrix(ctx context.Context, g *Group, b bufs, seed uint64) error {
	id := seed
	for _, dt := range testDTypes {
		for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
			ops := testOps
			if k == coll.AllGather || k == coll.Broadcast {
				ops = ops[:1]
			}
			for _, op := range ops {
				for _, mode := range []string{"sym", "inplace", "staged"} {
					if k == coll.Broadcast && mode == "inplace" {
						continue
					}
					count := smallCount
					if mode == "staged" {
						count = 3001 // several rounds of the 64 KiB staging buffer
					}
					id++
					if err := runCase(ctx, g, k, dt, op, mode, count, b, id); err != nil {
						return err
					}
				}
			}
		}
	}
	// All-reduces above the one-shot size take the two-shot plan: these in
	// place (over 64 KiB); out of place, the bigCount case below (over 1 MiB).
	for _, dt := range testDTypes {
		for _, op := range testOps {
			for _, mode := range []string{"sym", "inplace"} {
				id++
				if err := runCase(ctx, g, coll.AllReduce, dt, op, mode, 20000, b, id); err != nil {
					return err
				}
			}
		}
	}
	// Large calls take the worker-goroutine path.
	if err := runCase(ctx, g, coll.ReduceScatter, coll.Int64, coll.Min, "inplace", bigCount, b, seed+800); err != nil {
		return err
	}
	if err := runCase(ctx, g, coll.AllReduce, coll.Float16, coll.Max, "inplace", bigCount, b, seed+801); err != nil {
		return err
	}
	for i, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
		dt := []coll.DType{coll.Float32, coll.BFloat16, coll.Float32, coll.Int32}[i]
		if err := runCase(ctx, g, k, dt, coll.Avg, "sym", bigCount, b, seed+900+uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

// runCase runs one call with count elements per rank slice and checks it.
func runCase(ctx context.Context, g *Group, k coll.Kind, dt coll.DType, op coll.ReduceOp, mode string, count int, b bufs, id uint64) error {
	n, me, es := g.Size(), g.Rank(), dt.Size()
	var inB, outB int // bytes
	switch k {
	case coll.AllGather:
		inB, outB = count*es, n*count*es
	case coll.ReduceScatter:
		inB, outB = n*count*es, count*es
	default:
		inB, outB = n*count*es, n*count*es
	}
	var in, out []byte
	switch mode {
	case "sym":
		in, out = b.in.Bytes()[:inB], b.out.Bytes()[:outB]
	case "inplace":
		switch k {
		case coll.AllGather:
			out = b.out.Bytes()[:outB]
			in = out[me*inB : (me+1)*inB]
		case coll.ReduceScatter:
			in = b.in.Bytes()[:inB]
			out = in[me*outB : (me+1)*outB]
		default:
			in = b.in.Bytes()[:inB]
			out = in
		}
	case "staged":
		in, out = make([]byte, inB), make([]byte, outB)
	}
	root := int(id) % n
	what := fmt.Sprintf("%v %v %v %s count=%d on group %q rank %d", k, dt, op, mode, count, g.Name(), me)
	var path coll.Path
	var err error
	switch k {
	case coll.AllGather:
		fill(in, dt, id, me, 0, count)
		path, err = g.AllGather(ctx, HostSpan(out), HostSpan(in), dt)
	case coll.ReduceScatter:
		fill(in, dt, id, me, 0, n*count)
		path, err = g.ReduceScatter(ctx, HostSpan(out), HostSpan(in), dt, op)
	case coll.AllReduce:
		fill(in, dt, id, me, 0, n*count)
		path, err = g.AllReduce(ctx, HostSpan(out), HostSpan(in), dt, op)
	case coll.Broadcast:
		if me == root {
			fill(out, dt, id, root, 0, n*count)
		} else {
			fill(out, dt, id, me+1000, 0, n*count)
		}
		path, err = g.Broadcast(ctx, HostSpan(out), root, dt)
	}
	runtime.KeepAlive(in)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if path.Staged != (mode == "staged") {
		return fmt.Errorf("%s: path %v, want staged=%v", what, path, mode == "staged")
	}
	switch k {
	case coll.AllGather:
		return check(what, out, dt, op, n*count, func(i int) float64 { return value(dt, id, i/count, i%count) })
	case coll.ReduceScatter:
		return check(what, out, dt, op, count, func(i int) float64 { return reduced(dt, op, id, n, me*count+i) })
	case coll.AllReduce:
		return check(what, out, dt, op, n*count, func(i int) float64 { return reduced(dt, op, id, n, i) })
	default:
		return check(what, out, dt, op, n*count, func(i int) float64 { return value(dt, id, root, i) })
	}
}
