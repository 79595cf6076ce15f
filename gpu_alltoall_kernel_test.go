package symmem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// All-to-all on the kernel path (TestGPUWorldAllToAllKernel): equal
// blocks, host split counts, device split counts (splitsOut too), a
// device count past a rank's output refused on the GPU with nothing
// written, and the device form captured in a CUDA graph and replayed on
// new counts.

func init() { roles["gpua2akern"] = roleGPUAllToAllKernel }

func TestGPUWorldAllToAllKernel(t *testing.T) { gpuSpawn(t, "gpua2akern") }

// a2aCap is each rank's input and output capacity in float32; the output
// buffer has a2aGuard bytes more, which no call may write.
const (
	a2aCap   = 1 << 16
	a2aGuard = 256
)

// a2aState is one rank's buffers for the role.
type a2aState struct {
	w                     *World
	g                     *Group
	n, me                 int
	out, in, splits, sout Buffer
}

// newA2AState allocates the role's buffers in g.
func newA2AState(ctx context.Context, w *World, g *Group) (*a2aState, error) {
	n := g.Size()
	bufs, err := gpuAlloc(ctx, g, 4*a2aCap+a2aGuard, 4*a2aCap, int64(8*n), int64(16*n))
	if err != nil {
		return nil, err
	}
	return &a2aState{w: w, g: g, n: n, me: g.Rank(), out: bufs[0], in: bufs[1], splits: bufs[2], sout: bufs[3]}, nil
}

// inputOf is rank r's input for a call where it sends counts[r] (float32),
// from seed.
func inputOf(counts []int64, seed uint64) []byte {
	var total int64
	for _, c := range counts {
		total += c
	}
	b := make([]byte, 4*total)
	fillSeed(b, seed)
	return b
}

// a2aMatrices are count matrices for n ranks (counts[i][j]: rank i to rank
// j): zeros, odd sizes (byte mode), 16-byte multiples (vectors), a rank
// that sends nothing, everything to one peer.
func a2aMatrices(n int) map[string][][]int64 {
	mk := func(f func(i, j int) int64) [][]int64 { return countMatrix(n, f) }
	return map[string][][]int64{
		"zeros":           mk(func(i, j int) int64 { return 0 }),
		"odd":             mk(func(i, j int) int64 { return int64(1 + 7*i + 3*j) }),
		"vectors":         mk(func(i, j int) int64 { return int64(4 * (64 + 16*i + 4*j)) }),
		"rank 0 silent":   mk(func(i, j int) int64 { return int64(i * (100 + j)) }),
		"all to one peer": mk(func(i, j int) int64 { return int64(boolInt(j == n-1) * (a2aCap / n)) }),
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prepare fills the output (and its guard) and splitsOut with 0xAB and
// writes this rank's input; the caller meets the peers at a barrier next.
func (s *a2aState) prepare(ctx context.Context, in []byte) error {
	if err := s.w.Write(ctx, s.out.Span, bytes.Repeat([]byte{0xAB}, int(s.out.Len))); err != nil {
		return err
	}
	if err := s.w.Write(ctx, s.sout.Span, bytes.Repeat([]byte{0xAB}, int(s.sout.Len))); err != nil {
		return err
	}
	return s.w.Write(ctx, coll.Span{Ptr: s.in.Ptr, Len: int64(len(in))}, in)
}

// wrong counts the bytes of this rank's output that differ from counts and
// seeds (the blocks packed in rank order, 0xAB after them up to the guard's
// end) and, with splitsOut, its words that differ.
func (s *a2aState) wrong(ctx context.Context, counts [][]int64, sd []uint64, splitsOut bool) (int64, error) {
	got := make([]byte, s.out.Len)
	if err := s.w.Read(ctx, got, s.out.Span); err != nil {
		return 0, err
	}
	want := bytes.Repeat([]byte{0xAB}, len(got))
	var off, bad int64
	var so []int64
	for i := range s.n {
		src := inputOf(counts[i], sd[i])
		var at int64
		for j := range s.me {
			at += counts[i][j]
		}
		c := counts[i][s.me]
		copy(want[4*off:], src[4*at:4*(at+c)])
		so = append(so, c)
		off += c
	}
	for i, b := range got {
		if b != want[i] {
			bad++
		}
	}
	if splitsOut {
		var o int64
		for i := range s.n {
			so = append(so, o)
			o += so[i]
		}
		raw := make([]byte, s.sout.Len)
		if err := s.w.Read(ctx, raw, s.sout.Span); err != nil {
			return 0, err
		}
		for i, v := range so {
			if int64(binary.LittleEndian.Uint64(raw[8*i:])) != v {
				bad++
			}
		}
	}
	return bad, nil
}

// writeSplits writes this rank's row of counts into the splits buffer.
func (s *a2aState) writeSplits(ctx context.Context, row []int64) error {
	b := make([]byte, 8*s.n)
	for j, c := range row {
		binary.LittleEndian.PutUint64(b[8*j:], uint64(c))
	}
	return s.w.Write(ctx, s.splits.Span, b)
}

// roleGPUAllToAllKernel: see the file's comment.
func roleGPUAllToAllKernel(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n, me := g.Size(), g.Rank()
	s, err := newA2AState(ctx, w, g)
	if err != nil {
		return err
	}
	outCap := coll.Span{Ptr: s.out.Ptr, Len: 4 * a2aCap}
	kernel := WithAlgo(coll.AlgoKernel)
	// run makes one call of form on counts with fresh inputs and checks
	// every rank's output.
	run := func(form string, counts [][]int64) error {
		sd, err := seedsOf(ctx, g)
		if err != nil {
			return err
		}
		if err := s.prepare(ctx, inputOf(counts[me], sd[me])); err != nil {
			return err
		}
		if form == "device" || form == "device-auto" {
			if err := s.writeSplits(ctx, counts[me]); err != nil {
				return err
			}
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		var path coll.Path
		switch form {
		case "equal":
			c := counts[0][0] * int64(n)
			path, err = g.AllToAll(ctx, coll.Span{Ptr: s.out.Ptr, Len: 4 * c}, coll.Span{Ptr: s.in.Ptr, Len: 4 * c}, coll.Float32, kernel)
		case "host":
			recv := make([]int64, n)
			for i := range n {
				recv[i] = counts[i][me]
			}
			path, err = g.AllToAllV(ctx, outCap, s.in.Span, counts[me], recv, coll.Float32, kernel)
		case "device":
			path, err = g.AllToAllVDev(ctx, outCap, s.in.Span, s.splits.Span, s.sout.Span, coll.Float32, kernel)
		case "device-auto": // auto's choice: the one path that reads device counts
			path, err = g.AllToAllVDev(ctx, outCap, s.in.Span, s.splits.Span, s.sout.Span, coll.Float32)
		}
		if err == nil {
			err = w.Synchronize(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", form, err)
		}
		if path.Algo != coll.AlgoKernel {
			return fmt.Errorf("%s: ran on %s, want kernel", form, path.Algo)
		}
		bad, err := s.wrong(ctx, counts, sd, form != "equal" && form != "host")
		if err != nil {
			return err
		}
		if bad, err = sumWrong(ctx, g, bad); err != nil {
			return err
		}
		if bad != 0 {
			return fmt.Errorf("%s: %d wrong bytes or splitsOut words over the ranks", form, bad)
		}
		return nil
	}
	for _, c := range []int64{1, 5, 1024, 4097, a2aCap / int64(n)} {
		eq := make([][]int64, n)
		for i := range eq {
			eq[i] = make([]int64, n)
			for j := range eq[i] {
				eq[i][j] = c
			}
		}
		if err := run("equal", eq); err != nil {
			if otherHost(err) {
				fmt.Printf("SKIP: the group spans hosts, symmem's kernels do not run on it: %v\n", err)
				return nil
			}
			return fmt.Errorf("equal %d per peer: %w", c, err)
		}
		fmt.Printf("GPU a2a kernel equal %6d float32 per peer: ok\n", c)
	}
	ms := a2aMatrices(n)
	// Every rank takes the matrices in one order: Go randomises a map's,
	// and ranks out of step are refused (rank i sends x, rank j expects y).
	for _, name := range slices.Sorted(maps.Keys(ms)) {
		m := ms[name]
		for _, form := range []string{"host", "device", "device-auto"} {
			if err := run(form, m); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			fmt.Printf("GPU a2a kernel %-6s %-16s: ok\n", form, name)
		}
	}
	if err := a2aOverrun(ctx, s, outCap); err != nil {
		return err
	}
	if err := run("device", a2aMatrices(n)["odd"]); err != nil {
		return fmt.Errorf("the call after the overrun: %w", err)
	}
	return a2aGraph(ctx, w)
}

// a2aOverrun: every rank sends a2aCap/2+1 float32 to the last rank, which
// would receive more than its output holds: every rank's call fails with
// ErrInvalid naming the last rank and its count, and no output byte (the
// guard included) or splitsOut word was written.
func a2aOverrun(ctx context.Context, s *a2aState, outCap coll.Span) error {
	row := make([]int64, s.n)
	row[s.n-1] = a2aCap/2 + 1
	in := make([]byte, 4*row[s.n-1])
	if err := s.prepare(ctx, in); err != nil {
		return err
	}
	if err := s.writeSplits(ctx, row); err != nil {
		return err
	}
	if err := s.g.Barrier(ctx); err != nil {
		return err
	}
	_, err := s.g.AllToAllVDev(ctx, outCap, s.in.Span, s.splits.Span, s.sout.Span, coll.Float32, WithAlgo(coll.AlgoKernel))
	if err == nil {
		err = s.w.Synchronize(ctx)
	} else if serr := s.w.Synchronize(ctx); serr != nil {
		return fmt.Errorf("overrun: Synchronize after the call reported it: %w", serr)
	}
	last := s.g.ranks[s.n-1]
	want := fmt.Sprintf("rank %d would receive %d elements, but its out holds %d", last, int64(s.n)*row[s.n-1], a2aCap)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("overrun: %v, want ErrInvalid saying %q", err, want)
	}
	for _, b := range []Buffer{s.out, s.sout} {
		got := make([]byte, b.Len)
		if err := s.w.Read(ctx, got, b.Span); err != nil {
			return err
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{0xAB}, len(got))) {
			return fmt.Errorf("overrun: the refused call wrote into a buffer at %#x", b.Ptr)
		}
	}
	fmt.Printf("GPU a2a kernel device overrun: refused on every rank, nothing written: %v\n", err)
	return nil
}

// a2aGraph captures one device-splits all-to-all on a caller stream and
// replays it on new counts and inputs written between replays. A group of
// its own: closing it fences the caller stream, which must happen before
// the stream is destroyed.
func a2aGraph(ctx context.Context, w *World) error {
	g, err := w.NewGroup(ctx, "a2agraph", w.World().Ranks())
	if err != nil {
		return err
	}
	s, err := newA2AState(ctx, w, g)
	if err != nil {
		return err
	}
	outCap := coll.Span{Ptr: s.out.Ptr, Len: 4 * a2aCap}
	cctx := w.be.(*cuda.Backend).Context()
	st, err := cudadrv.NewStream(cctx, 0)
	if err != nil {
		return err
	}
	defer st.Destroy() // runs after the group's Close below
	defer g.Close(ctx)
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	if err := cudadrv.BeginCapture(cctx, st); err != nil {
		return err
	}
	_, rerr := g.AllToAllVDev(ctx, outCap, s.in.Span, s.splits.Span, s.sout.Span, coll.Float32, WithAlgo(coll.AlgoKernel), WithStream(st.Handle()))
	gr, err := cudadrv.EndCapture(cctx, st)
	if rerr != nil || err != nil {
		return fmt.Errorf("graph: capture: run %v, end %v", rerr, err)
	}
	defer gr.Destroy()
	ms := a2aMatrices(s.n)
	for round, name := range []string{"odd", "vectors", "all to one peer", "zeros", "rank 0 silent"} {
		counts := ms[name]
		sd, err := seedsOf(ctx, g)
		if err != nil {
			return err
		}
		if err := s.prepare(ctx, inputOf(counts[s.me], sd[s.me])); err != nil {
			return err
		}
		if err := s.writeSplits(ctx, counts[s.me]); err != nil {
			return err
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		if err := gr.Launch(st); err != nil {
			return err
		}
		if err := st.Wait(ctx, 30*time.Second); err != nil {
			return err
		}
		bad, err := s.wrong(ctx, counts, sd, true)
		if err != nil {
			return err
		}
		if bad, err = sumWrong(ctx, g, bad); err != nil {
			return err
		}
		if bad != 0 {
			return fmt.Errorf("graph replay %d (%s): %d wrong bytes or splitsOut words over the ranks", round, name, bad)
		}
		fmt.Printf("GPU a2a kernel graph replay %d (%s): ok\n", round, name)
	}
	// A fault the replays reported would show here.
	return w.Synchronize(ctx)
}
