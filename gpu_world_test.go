package symmem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/reduce"
)

// GPU tests on the user API (they ran on a second World in internal/backend/cuda
// before): all-gather on every algorithm, two groups on one pool, CUDA graph
// capture on a caller stream, the reduction kernels bit-exact, and a peer
// that dies. Each test spawns the ranks gpuRanks chooses: one per GPU, or
// several sharing one GPU (scripts/gpu-check.sh runs 2 and 3).

func init() {
	roles["gpuag"] = roleGPUAllGather
	roles["gputwo"] = roleGPUTwoGroups
	roles["gpugraph"] = roleGPUGraph
	roles["gpuark"] = roleGPUReduceKernels
	roleLimits["gpuark"] = 150 * time.Second // 408 cases up to 48 MiB per rank: ~36 s with 2 ranks on one GPU, over 50 s with 3
	roles["gpudie"] = roleGPUPeerDies
	roles["gpumismatch"] = roleGPUKernelMismatch
}

// gpuSpawn runs role on the ranks gpuRanks chooses (several may share a
// GPU), or skips with the reason.
func gpuSpawn(t *testing.T, role string) {
	t.Helper()
	n, env := gpuRanks(t)
	res := spawn(t, n, role, env...)
	for r, rr := range res {
		t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
	}
	expectOK(t, res)
}

func TestGPUWorldAllGather(t *testing.T)      { gpuSpawn(t, "gpuag") }
func TestGPUWorldTwoGroups(t *testing.T)      { gpuSpawn(t, "gputwo") }
func TestGPUWorldGraph(t *testing.T)          { gpuSpawn(t, "gpugraph") }
func TestGPUWorldReduceKernel(t *testing.T)   { gpuSpawn(t, "gpuark") }
func TestGPUWorldPeerDies(t *testing.T)       { gpuSpawn(t, "gpudie") }
func TestGPUWorldKernelMismatch(t *testing.T) { gpuSpawn(t, "gpumismatch") }

// otherHost reports whether err is a forced path's refusal because the
// group spans hosts (a run with SYMMEM_TEST_HOSTS, docs/multihost.md):
// symmem's kernels and copy engines need every rank of a group on one host,
// so such a run skips them, saying so; any other refusal stays a failure.
func otherHost(err error) bool {
	return envInt("SYMMEM_TEST_HOSTS", 0) > 1 && errors.Is(err, ErrNotSupported) && strings.Contains(err.Error(), "runs on another host")
}

// gpuWorld starts the cuda backend for a role.
func gpuWorld(ctx context.Context, o Options) (*World, error) {
	o.Backend = "cuda"
	if o.Timeout == 0 {
		o.Timeout = 40 * time.Second
	}
	return Init(ctx, o)
}

// gpuAlloc allocates symmetric buffers of the given sizes in one scope of g.
func gpuAlloc(ctx context.Context, g *Group, sizes ...int64) ([]Buffer, error) {
	sc, err := g.OpenScope()
	if err != nil {
		return nil, err
	}
	var bufs []Buffer
	for _, s := range sizes {
		b, err := sc.Alloc(s)
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
	}
	return bufs, sc.End(ctx)
}

// fillSeed writes pseudo-random bytes from seed.
func fillSeed(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for ; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// seedsOf gives every member a fresh seed per member (through the store).
func seedsOf(ctx context.Context, g *Group) ([]uint64, error) {
	mine := rand.Uint64() ^ uint64(time.Now().UnixNano())
	all, err := g.AllGatherHost(ctx, binary.LittleEndian.AppendUint64(nil, mine))
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(all))
	for r, v := range all {
		out[r] = binary.LittleEndian.Uint64(v)
	}
	return out, nil
}

// sumWrong adds every member's count of wrong bytes.
func sumWrong(ctx context.Context, g *Group, wrong int64) (int64, error) {
	all, err := g.AllGatherHost(ctx, binary.LittleEndian.AppendUint64(nil, uint64(wrong)))
	if err != nil {
		return 0, err
	}
	var s int64
	for _, v := range all {
		s += int64(binary.LittleEndian.Uint64(v))
	}
	return s, nil
}

// gatherOnce runs one all-gather of count elements per rank on g with fresh
// data and returns the wrong bytes summed over the members (0 and the
// refusal as the path when the forced algorithm refused this geometry: every
// rank refuses alike).
func gatherOnce(ctx context.Context, w *World, g *Group, out, in coll.Span, count int64, dt coll.DType, inPlace bool, algo coll.Algo) (coll.Path, int64, error) {
	n, me := int64(g.Size()), int64(g.Rank())
	slice := count * int64(dt.Size())
	total := slice * n
	sd, err := seedsOf(ctx, g)
	if err != nil {
		return coll.Path{}, 0, err
	}
	if err := w.Write(ctx, coll.Span{Ptr: out.Ptr, Len: total + 64}, bytes.Repeat([]byte{0xAB}, int(total+64))); err != nil {
		return coll.Path{}, 0, err
	}
	src := coll.Span{Ptr: in.Ptr, Len: slice}
	if inPlace {
		src = coll.Span{Ptr: out.Ptr + uint64(me*slice), Len: slice}
	}
	mine := make([]byte, slice)
	fillSeed(mine, sd[me])
	if err := w.Write(ctx, src, mine); err != nil {
		return coll.Path{}, 0, err
	}
	if err := g.Barrier(ctx); err != nil { // every rank's input has landed
		return coll.Path{}, 0, err
	}
	path, err := g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: total}, src, dt, WithAlgo(algo))
	if errors.Is(err, ErrRefused) {
		return coll.Path{Algo: algo, Reason: "refused: " + err.Error()}, 0, nil
	}
	if errors.Is(err, ErrNotSupported) { // e.g. NCCL with two ranks on one GPU
		return coll.Path{Algo: algo, Reason: "unavailable: " + err.Error()}, 0, nil
	}
	if err != nil {
		return path, 0, err
	}
	got := make([]byte, total+64)
	if err := w.Read(ctx, got, coll.Span{Ptr: out.Ptr, Len: total + 64}); err != nil {
		return path, 0, err
	}
	var wrong int64
	want := make([]byte, slice)
	for r := int64(0); r < n; r++ {
		fillSeed(want, sd[r])
		for i, b := range got[r*slice : (r+1)*slice] {
			if b != want[i] {
				wrong++
			}
		}
	}
	for _, b := range got[total:] {
		if b != 0xAB {
			wrong++ // wrote past the output
		}
	}
	sum, err := sumWrong(ctx, g, wrong)
	return path, sum, err
}

// roleGPUAllGather: fresh random data, 4 KiB..64 MiB, odd counts and
// 16-byte slices, bf16/f32/int8, in-place and out-of-place, auto and every
// algorithm the backend declares.
func roleGPUAllGather(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n := int64(g.Size())
	const maxBytes = 64 << 20
	bufs, err := gpuAlloc(ctx, g, maxBytes+4096, maxBytes/n+4096)
	if err != nil {
		return err
	}
	algos := append([]coll.Algo{coll.AlgoAuto}, w.Algos(coll.AllGather)...)
	cases, bad, refused, unavailable := 0, 0, 0, map[coll.Algo]string{}
	start := time.Now()
	for _, size := range []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20} {
		for _, dt := range []coll.DType{coll.BFloat16, coll.Float32, coll.Int8} {
			count := size / int64(dt.Size()) / n
			if count%2 == 0 {
				count--
			}
			for _, count := range []int64{count, size / n / 16 * 16 / int64(dt.Size())} {
				for _, inPlace := range []bool{false, true} {
					for _, algo := range algos {
						path, wrong, err := gatherOnce(ctx, w, g, bufs[0].Span, bufs[1].Span, count, dt, inPlace, algo)
						if err != nil {
							return fmt.Errorf("all_gather %d bytes %v count=%d in-place=%v %s: %w", size, dt, count, inPlace, algo, err)
						}
						cases++
						if strings.HasPrefix(path.Reason, "refused: ") {
							refused++
						}
						if r, ok := strings.CutPrefix(path.Reason, "unavailable: "); ok {
							unavailable[algo] = r
						}
						if wrong != 0 {
							bad++
							fmt.Printf("WRONG all_gather %d bytes %v count=%d in-place=%v %s (path %s): %d bytes\n", size, dt, count, inPlace, algo, path.Algo, wrong)
						}
					}
				}
			}
		}
	}
	fmt.Printf("GPU all_gather: %d cases, %d wrong, %d refused, %.1fs (algos %v)\n", cases, bad, refused, time.Since(start).Seconds(), algos)
	for a, why := range unavailable {
		fmt.Printf("GPU all_gather: %s unavailable here: %s\n", a, why)
	}
	if bad != 0 {
		return fmt.Errorf("%d of %d all-gather cases wrong", bad, cases)
	}
	return nil
}

// roleGPUTwoGroups: two groups share one pool; each gathers in its own
// blocks, alternating, and both stay correct.
func roleGPUTwoGroups(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g1 := w.World()
	g2, err := w.NewGroup(ctx, "second", g1.Ranks())
	if err != nil {
		return err
	}
	b1, err := gpuAlloc(ctx, g1, 32<<20, 16<<20)
	if err != nil {
		return err
	}
	b2, err := gpuAlloc(ctx, g2, 32<<20, 16<<20)
	if err != nil {
		return err
	}
	n := int64(g1.Size())
	for i := 0; i < 6; i++ {
		count := int64(1<<20*(i+1)+1) / n
		for j, x := range []struct {
			g    *Group
			bufs []Buffer
		}{{g1, b1}, {g2, b2}} {
			_, wrong, err := gatherOnce(ctx, w, x.g, x.bufs[0].Span, x.bufs[1].Span, count, coll.BFloat16, (i+j)%2 == 0, coll.AlgoAuto)
			if err != nil {
				return fmt.Errorf("group %s round %d: %w", x.g.Name(), i, err)
			}
			if wrong != 0 {
				return fmt.Errorf("group %s round %d: %d wrong bytes", x.g.Name(), i, wrong)
			}
		}
	}
	fmt.Printf("GPU two groups on one pool: ok, pool %+v\n", w.pool.Stats())
	return nil
}

// roleGPUGraph captures one in-place all-gather per forced algorithm into a
// CUDA graph on a caller stream (WithStream), then replays it: once per
// fresh input (checked after each) and 50 times back to back.
func roleGPUGraph(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	if !cudadrv.HaveGraphs() {
		fmt.Println("SKIP: the driver lacks graph capture")
		return nil
	}
	// A group of its own: closing it fences the caller stream it ran on,
	// which must happen before the stream is destroyed.
	g, err := w.NewGroup(ctx, "graph", w.World().Ranks())
	if err != nil {
		return err
	}
	n, me := int64(g.Size()), int64(g.Rank())
	bufs, err := gpuAlloc(ctx, g, 32<<20, 32<<20)
	if err != nil {
		return err
	}
	out := bufs[0]
	cctx := w.be.(*cuda.Backend).Context()
	s, err := cudadrv.NewStream(cctx, 0)
	if err != nil {
		return err
	}
	defer s.Destroy() // runs after the group's Close below
	defer g.Close(ctx)
	for _, algo := range w.Algos(coll.AllGather) {
		for _, size := range []int64{64 << 10, 1 << 20, 32 << 20} {
			slice := size / n &^ 15 // 16-byte multiples: the kernel's vectors, with 3 ranks too
			size := slice * n
			in := coll.Span{Ptr: out.Ptr + uint64(me*slice), Len: slice}
			if err := g.Barrier(ctx); err != nil {
				return err
			}
			if err := cudadrv.BeginCapture(cctx, s); err != nil {
				return err
			}
			_, rerr := g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: size}, in, coll.BFloat16, WithAlgo(algo), WithStream(s.Handle()))
			gr, err := cudadrv.EndCapture(cctx, s)
			if errors.Is(rerr, ErrRefused) || errors.Is(rerr, ErrNotSupported) {
				fmt.Printf("GPU graph %-12s %9d bytes: skipped: %v\n", algo, size, rerr)
				if gr != nil {
					gr.Destroy()
				}
				continue
			}
			if rerr != nil || err != nil {
				return fmt.Errorf("%s %d bytes: capture: run %v, end %v", algo, size, rerr, err)
			}
			host, want := make([]byte, size), make([]byte, slice)
			var wrong int64
			check := func(sd []uint64) error {
				if err := s.Wait(ctx, 30*time.Second); err != nil {
					return err
				}
				if err := w.Read(ctx, host, coll.Span{Ptr: out.Ptr, Len: size}); err != nil {
					return err
				}
				for r := int64(0); r < n; r++ {
					fillSeed(want, sd[r])
					if !bytes.Equal(host[r*slice:(r+1)*slice], want) {
						wrong++
					}
				}
				return nil
			}
			for round := 0; round < 4; round++ {
				sd, err := seedsOf(ctx, g)
				if err != nil {
					return err
				}
				fillSeed(want, sd[me])
				if err := w.Write(ctx, in, want); err != nil {
					return err
				}
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				if err := gr.Launch(s); err != nil {
					return err
				}
				if err := check(sd); err != nil {
					return err
				}
				if round == 3 { // 50 replays back to back: the data stays the same
					for i := 0; i < 50; i++ {
						if err := gr.Launch(s); err != nil {
							return err
						}
					}
					if err := check(sd); err != nil {
						return err
					}
				}
			}
			gr.Destroy()
			sum, err := sumWrong(ctx, g, wrong)
			if err != nil {
				return err
			}
			fmt.Printf("GPU graph %-12s %9d bytes: 4 fresh replays + 50 back to back, %d wrong slices\n", algo, size, sum)
			if sum != 0 {
				return fmt.Errorf("%s %d bytes: %d wrong slices after graph replay", algo, size, sum)
			}
		}
	}
	if err := graphReductions(ctx, w, g, s, bufs[1], out); err != nil {
		return err
	}
	// Free fences the caller stream's work before the pool reuses the bytes.
	if err := w.FreeOn(bufs[1], s.Handle()); err != nil {
		return err
	}
	return w.FreeOn(out, s.Handle())
}

// graphReductions captures an all-reduce (sum, float32) through each of
// symmem's reduction paths on stream s and replays it on fresh inputs
// against reduce.ReduceN. lc's first call in the group happens inside the
// capture and must be refused (its staging is allocated at the first call,
// which a capture cannot do), naming what to do; after one eager call it
// captures.
func graphReductions(ctx context.Context, w *World, g *Group, s *cudadrv.Stream, in, out Buffer) error {
	n, me := g.Size(), g.Rank()
	cctx := w.be.(*cuda.Backend).Context()
	for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention} {
		for _, nb := range []int64{48 << 10, 24<<20 + 96} {
			src, dst := coll.Span{Ptr: in.Ptr, Len: nb}, coll.Span{Ptr: out.Ptr, Len: nb}
			capture := func() (*cudadrv.Graph, error) {
				if err := g.Barrier(ctx); err != nil {
					return nil, err
				}
				if err := cudadrv.BeginCapture(cctx, s); err != nil {
					return nil, err
				}
				_, rerr := g.AllReduce(ctx, dst, src, coll.Float32, coll.Sum, WithAlgo(algo), WithStream(s.Handle()))
				gr, err := cudadrv.EndCapture(cctx, s)
				if rerr != nil {
					if gr != nil {
						gr.Destroy()
					}
					return nil, rerr
				}
				return gr, err
			}
			gr, err := capture()
			if algo == coll.AlgoLowContention && nb == 48<<10 && !otherHost(err) {
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "run one lc call before capturing") {
					return fmt.Errorf("lc's first call inside a capture: %v, want a refusal saying to run one lc call first", err)
				}
				fmt.Printf("GPU graph lc first call in a capture refused: %v\n", err)
				if _, err := g.AllReduce(ctx, dst, src, coll.Float32, coll.Sum, WithAlgo(algo), WithStream(s.Handle())); err != nil {
					return fmt.Errorf("lc eager call: %w", err)
				}
				gr, err = capture()
			}
			if otherHost(err) {
				fmt.Printf("GPU graph %-12s all_reduce %9d bytes: skipped, the group spans hosts: %v\n", algo, nb, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("graph %s all-reduce %d bytes: %w", algo, nb, err)
			}
			var wrong int64
			for round := 0; round < 3; round++ {
				sd, err := seedsOf(ctx, g)
				if err != nil {
					return err
				}
				inputs := make([][]byte, n)
				for r := range inputs {
					inputs[r] = arValues(coll.Float32, nb/4, sd[r])
				}
				want := make([]byte, nb)
				if err := reduce.ReduceN(want, inputs, coll.Float32, coll.Sum); err != nil {
					return err
				}
				if err := w.Write(ctx, src, inputs[me]); err != nil {
					return err
				}
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				if err := gr.Launch(s); err != nil {
					return err
				}
				if err := s.Wait(ctx, 30*time.Second); err != nil {
					return err
				}
				got := make([]byte, nb)
				if err := w.Read(ctx, got, dst); err != nil {
					return err
				}
				if !bytes.Equal(got, want) {
					wrong++
				}
			}
			gr.Destroy()
			sum, err := sumWrong(ctx, g, wrong)
			if err != nil {
				return err
			}
			fmt.Printf("GPU graph %-12s all_reduce %9d bytes: 3 replays on fresh inputs, %d wrong\n", algo, nb, sum)
			if sum != 0 {
				return fmt.Errorf("%s all-reduce %d bytes: %d wrong results after graph replay", algo, nb, sum)
			}
		}
	}
	return nil
}

// arValues is count random finite values of dt from seed.
func arValues(dt coll.DType, count int64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, count*int64(dt.Size()))
	for i := int64(0); i < count; i++ {
		v := float32(rng.Float64()*200 - 100)
		switch dt {
		case coll.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v*10))
		case coll.BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToBF16(v))
		case coll.Float16:
			binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToF16(v))
		}
	}
	return b
}

// roleGPUReduceKernels: all-reduce and reduce-scatter forced onto symmem's
// kernel against reduce.ReduceN (the same float32 sums in rank order, one
// rounding): bit-exact, fresh data, 16 B..48 MiB per rank, f32/bf16/f16,
// in-place and out-of-place.
func roleGPUReduceKernels(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n, me := g.Size(), g.Rank()
	// Sizes: one vector; small; split into whole vectors on 2 and 3 ranks
	// (counts that do not split evenly: TestGPUWorldOddCounts); the held
	// kernel's 2 MiB limit and above; several lc sub-chunks with a short
	// last one; more than lc's 32 MiB staging.
	sizes := []int64{16, 4096, 48 << 10, 1 << 20, 3 << 20, 24<<20 + 96, 48 << 20}
	maxBytes := sizes[len(sizes)-1]
	bufs, err := gpuAlloc(ctx, g, int64(n)*maxBytes+4096, int64(n)*maxBytes)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	cases, bad, refused := 0, 0, 0
	for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention} {
		// An algorithm that refuses every case is broken, not picky (a
		// kernel that does not load refuses with ErrNotSupported).
		ran, why, hostWhy := 0, error(nil), error(nil)
		for _, kind := range []coll.Kind{coll.AllReduce, coll.ReduceScatter} {
			for _, op := range []coll.ReduceOp{coll.Sum, coll.Avg} {
				for _, dt := range []coll.DType{coll.Float32, coll.BFloat16, coll.Float16} {
					for _, nb := range sizes {
						// Large sizes for two (op, type) pairs: they test the
						// pipeline, not the arithmetic.
						if nb > 4<<20 && !(op == coll.Sum && dt == coll.BFloat16 || op == coll.Avg && dt == coll.Float32) {
							continue
						}
						for _, inPlace := range []bool{false, true} {
							c := reduceCase{algo: algo, kind: kind, op: op, dt: dt, nb: nb, inPlace: inPlace}
							wrong, err := c.run(ctx, w, g, out, in, n, me)
							cases++
							if errors.Is(err, ErrRefused) || errors.Is(err, ErrNotSupported) {
								refused++
								why = err
								if otherHost(err) {
									hostWhy = err
								}
								continue
							}
							if err != nil {
								return fmt.Errorf("%s: %w", c, err)
							}
							ran++
							if wrong != 0 {
								bad++
								fmt.Printf("WRONG %s: %d bytes\n", c, wrong)
							}
						}
					}
				}
			}
		}
		if ran == 0 && hostWhy != nil { // (two-shot also refuses reduce-scatter everywhere: not an all-reduce)
			fmt.Printf("GPU reduction kernels: %s skipped, the group spans hosts: %v\n", algo, hostWhy)
			continue
		}
		if ran == 0 {
			return fmt.Errorf("%s refused every case, e.g. %v", algo, why)
		}
	}
	fmt.Printf("GPU reduction kernels: %d cases, %d wrong, %d refused (kernel, two-shot, lc; sum and avg; bit-exact against reduce.ReduceN + Finish)\n", cases, bad, refused)
	if bad != 0 {
		return fmt.Errorf("%d of %d kernel cases wrong", bad, cases)
	}
	return nil
}

// reduceCase is one reduction through a forced algorithm: nb bytes of
// output per rank.
type reduceCase struct {
	algo    coll.Algo
	kind    coll.Kind
	op      coll.ReduceOp
	dt      coll.DType
	nb      int64
	inPlace bool
}

func (c reduceCase) String() string {
	return fmt.Sprintf("%v %s %v %v %d bytes in-place=%v", c.kind, c.algo, c.op, c.dt, c.nb, c.inPlace)
}

// run writes fresh inputs, runs the call and returns the wrong bytes summed
// over the members (the refusal as the error when the algorithm refused:
// every rank refuses alike).
func (c reduceCase) run(ctx context.Context, w *World, g *Group, out, in Buffer, n, me int) (int64, error) {
	inBytes, chunk := c.nb, int64(0)
	if c.kind == coll.ReduceScatter {
		inBytes, chunk = c.nb*int64(n), c.nb*int64(me)
	}
	sd, err := seedsOf(ctx, g)
	if err != nil {
		return 0, err
	}
	inputs, parts := make([][]byte, n), make([][]byte, n)
	for r := range inputs {
		inputs[r] = arValues(c.dt, inBytes/int64(c.dt.Size()), sd[r])
		parts[r] = inputs[r][chunk : chunk+c.nb]
	}
	want := make([]byte, c.nb)
	if err := reduce.ReduceN(want, parts, c.dt, c.op); err != nil {
		return 0, err
	}
	if err := reduce.Finish(want, c.dt, c.op, n); err != nil {
		return 0, err
	}
	src, dst := coll.Span{Ptr: in.Ptr, Len: inBytes}, coll.Span{Ptr: out.Ptr, Len: c.nb}
	if c.inPlace {
		src = coll.Span{Ptr: out.Ptr, Len: inBytes}
		dst = coll.Span{Ptr: out.Ptr + uint64(chunk), Len: c.nb}
	}
	if err := w.Write(ctx, coll.Span{Ptr: out.Ptr, Len: inBytes + 4096}, bytes.Repeat([]byte{0xAB}, int(inBytes+4096))); err != nil {
		return 0, err
	}
	if err := w.Write(ctx, src, inputs[me]); err != nil {
		return 0, err
	}
	if err := g.Barrier(ctx); err != nil {
		return 0, err
	}
	var rerr error
	if c.kind == coll.AllReduce {
		_, rerr = g.AllReduce(ctx, dst, src, c.dt, c.op, WithAlgo(c.algo))
	} else {
		_, rerr = g.ReduceScatter(ctx, dst, src, c.dt, c.op, WithAlgo(c.algo))
	}
	if rerr != nil {
		return 0, rerr
	}
	got := make([]byte, c.nb+4096)
	if err := w.Read(ctx, got, coll.Span{Ptr: dst.Ptr, Len: c.nb + 4096}); err != nil {
		return 0, err
	}
	var wrong int64
	for i := range want {
		if got[i] != want[i] {
			wrong++
		}
	}
	if !c.inPlace || c.kind == coll.AllReduce {
		for _, b := range got[c.nb:] {
			if b != 0xAB {
				wrong++
			}
		}
	}
	return sumWrong(ctx, g, wrong)
}

// roleGPUPeerDies: rank 1 exits before an all-gather; the other ranks'
// kernels must not spin until the watchdog (3 s here): the call gate's
// watcher sees the exit and abandons the call, the kernels read the
// gate's failed word and stop waiting, so Synchronize fails within 1 s on
// every other rank, naming rank 1; no trap, so the context still works
// (a write and read back), while the group refuses further calls.
func roleGPUPeerDies(ctx context.Context) error {
	const watchdog = 3 * time.Second
	w, err := gpuWorld(ctx, Options{GPU: GPUOptions{Watchdog: watchdog}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	g := w.World()
	if !w.Supports(coll.AllGather, coll.AlgoKernel) {
		return fmt.Errorf("the cuda backend does not declare the kernel path")
	}
	bufs, err := gpuAlloc(ctx, g, 1<<20)
	if err != nil {
		return err
	}
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	slice := int64(1<<20) / int64(g.Size()) &^ 15 // the kernel's 16-byte vectors, with 3 ranks too
	in := coll.Span{Ptr: bufs[0].Ptr + uint64(int64(g.Rank())*slice), Len: slice}
	out := coll.Span{Ptr: bufs[0].Ptr, Len: slice * int64(g.Size())}
	if envInt("SYMMEM_TEST_HOSTS", 0) > 1 {
		return peerDiesAcrossHosts(ctx, w, g, out, in)
	}
	if g.Rank() == 1 {
		os.Exit(0) // dies between collectives, as a crashed rank would
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := g.AllGather(ctx, out, in, coll.BFloat16, WithAlgo(coll.AlgoKernel)); err != nil {
		if errors.Is(err, ErrRefused) {
			fmt.Println("SKIP: the kernel refused this geometry:", err)
			return nil
		}
		return err
	}
	t0 := time.Now()
	serr := w.Synchronize(ctx)
	el := time.Since(t0)
	fmt.Printf("GPU peer dies: rank 1 exited; rank %d's Synchronize after %v: %v\n", g.Rank(), el.Round(time.Millisecond), serr)
	switch {
	case serr == nil:
		return fmt.Errorf("the all-gather completed without its peer")
	case el >= watchdog-500*time.Millisecond:
		return fmt.Errorf("failed after %v, at the %v watchdog: the gate's watcher did not stop the kernel waiting for the exited rank", el, watchdog)
	case el >= time.Second:
		return fmt.Errorf("failed after %v, want < 1 s", el)
	case !errors.Is(serr, ErrPeerExited) || !strings.Contains(serr.Error(), "rank 1 exited"):
		return fmt.Errorf("the error does not say rank 1 exited (ErrPeerExited): %v", serr)
	case !strings.Contains(serr.Error(), "context is intact"):
		return fmt.Errorf("the error does not say the kernel ended with the context intact: %v", serr)
	}
	// The kernel stopped waiting instead of trapping: this process's
	// context still works (a write and a read through it).
	probe := bytes.Repeat([]byte{0x5A}, 4096)
	if err := w.Write(ctx, coll.Span{Ptr: bufs[0].Ptr, Len: int64(len(probe))}, probe); err != nil {
		return fmt.Errorf("the context does not work after the peer's exit: %w", err)
	}
	back := make([]byte, len(probe))
	if err := w.Read(ctx, back, coll.Span{Ptr: bufs[0].Ptr, Len: int64(len(back))}); err != nil || !bytes.Equal(back, probe) {
		return fmt.Errorf("the context does not read back after the peer's exit: %v", err)
	}
	if _, err := g.AllGather(ctx, out, in, coll.BFloat16, WithAlgo(coll.AlgoKernel)); err == nil {
		return fmt.Errorf("a call on the group after the peer's exit succeeded")
	}
	return nil
}

// peerDiesAcrossHosts is roleGPUPeerDies on a world that spans hosts
// (SYMMEM_TEST_HOSTS): symmem's kernels do not run there, NCCL does. The
// other ranks queue an all-gather (auto: NCCL) while rank 1 lives; rank 1
// exits 300 ms later without making it. Its presence in the store ends,
// every other rank's group aborts its NCCL communicators, and Synchronize
// fails within 1 s of the exit naming rank 1 and its host (not at the
// watchdog or never); a later host-side wait (a barrier) fails at once.
func peerDiesAcrossHosts(ctx context.Context, w *World, g *Group, out, in coll.Span) error {
	const exitAfter = 300 * time.Millisecond
	if g.Rank() == 1 {
		time.Sleep(exitAfter)
		os.Exit(0) // never makes the all-gather, as a crashed rank would
	}
	t0 := time.Now()
	if _, err := g.AllGather(ctx, out, in, coll.BFloat16); err != nil {
		return fmt.Errorf("queueing the all-gather while rank 1 lives: %w", err)
	}
	serr := w.Synchronize(ctx)
	el := time.Since(t0)
	berr := g.Barrier(ctx)
	fmt.Printf("GPU peer dies across hosts: rank 1 exited after %v; rank %d's Synchronize after %v: %v; barrier: %v\n",
		exitAfter, g.Rank(), el.Round(time.Millisecond), serr, berr)
	switch {
	case serr == nil:
		return fmt.Errorf("the all-gather completed without rank 1")
	case el >= exitAfter+time.Second:
		return fmt.Errorf("Synchronize failed %v after rank 1's exit, want < 1 s: %w", el-exitAfter, serr)
	case !errors.Is(serr, ErrPeerExited) || !strings.Contains(serr.Error(), "rank 1 (host "):
		return fmt.Errorf("Synchronize's error does not name rank 1 and its host (ErrPeerExited): %w", serr)
	case !errors.Is(berr, ErrPeerExited):
		return fmt.Errorf("a barrier after rank 1's exit: %v, want ErrPeerExited", berr)
	}
	return nil
}

// roleGPUKernelMismatch: ranks call a kernel-path collective with different
// arguments: another type of the same bytes (rank 0 float32, the others
// bfloat16: the same grid), or a quarter of the count (a smaller grid: rank
// 0's extra CTAs have no peer CTA to meet, and must not wait for one). The
// kernels compare the calls' digests in-band: nothing is written (the
// outputs keep their fill), Synchronize reports ErrMismatch on every rank
// naming the argument (dtype or count) with both values, and the group then
// runs a matching call correctly. For the all-gather,
// one-shot and two-shot kernels.
func roleGPUKernelMismatch(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n, me := int64(g.Size()), int64(g.Rank())
	const elems = 3 << 14 // float32 per rank (all-gather) or in total (all-reduce): two-shot chunks for 2 and 3 ranks
	bufs, err := gpuAlloc(ctx, g, 4*elems*n, 4*elems*n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	fill := bytes.Repeat([]byte{0xAB}, int(out.Len))
	// "path": the same arguments, rank 0 forcing two-shot (two launches)
	// and the others the one-shot kernel (one): the second launch of rank 0
	// ends uncounted, so the matching call after it pairs up right.
	for _, variant := range []string{"type", "count", "path"} {
		for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot} {
			for _, kind := range []coll.Kind{coll.AllGather, coll.AllReduce} {
				if algo == coll.AlgoTwoShot && kind == coll.AllGather || variant == "path" && (algo != coll.AlgoKernel || kind != coll.AllGather) {
					continue
				}
				if variant == "path" {
					kind = coll.AllReduce
				}
				dt, bytes0, ralgo := coll.Float32, int64(4*elems), algo
				switch {
				case variant == "path":
					if me == 0 {
						ralgo = coll.AlgoTwoShot
					}
				case me == 0:
				case variant == "type":
					dt = coll.BFloat16 // the same bytes: twice the count, the same grid
				default:
					bytes0 /= 4 // a quarter of the count: a smaller grid (CTAs of rank 0 meet no peer CTA)
				}
				run := func(dt coll.DType, bytes int64, algo coll.Algo) error {
					o := coll.Span{Ptr: out.Ptr, Len: bytes}
					if kind == coll.AllGather {
						o.Len = bytes * n
						_, err := g.AllGather(ctx, o, coll.Span{Ptr: in.Ptr, Len: bytes}, dt, WithAlgo(algo))
						return err
					}
					_, err := g.AllReduce(ctx, o, coll.Span{Ptr: in.Ptr, Len: bytes}, dt, coll.Sum, WithAlgo(algo))
					return err
				}
				if err := w.Write(ctx, out.Span, fill); err != nil {
					return err
				}
				if err := w.Write(ctx, in.Span, arValues(coll.Float32, elems*n, uint64(me+1))); err != nil {
					return err
				}
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				// The call itself reports when its kernel ended before the
				// host looked (run 26, 3 ranks); else Synchronize does.
				serr := run(dt, bytes0, ralgo)
				if otherHost(serr) {
					fmt.Printf("SKIP: the group spans hosts, symmem's kernels do not run on it: %v\n", serr)
					return nil
				}
				if serr != nil && !errors.Is(serr, ErrMismatch) {
					return fmt.Errorf("%v %s mismatched %s: %w", kind, algo, variant, serr)
				}
				if serr == nil {
					serr = w.Synchronize(ctx)
				} else if err := w.Synchronize(ctx); err != nil {
					return fmt.Errorf("%v %s: Synchronize after the call reported the mismatch: %w", kind, algo, err)
				}
				if !errors.Is(serr, ErrMismatch) {
					return fmt.Errorf("%v %s: ranks passed another %s than rank 0: Synchronize returned %v, want ErrMismatch", kind, algo, variant, serr)
				}
				// Every rank's error names the argument with both values
				// (fault.go swaps the records of the differing pair).
				named := []string{"with dtype=float32", "with dtype=bfloat16"}
				switch variant {
				case "count":
					named = []string{fmt.Sprintf("with count=%d", elems), fmt.Sprintf("with count=%d", elems/4)}
				case "path":
					named = []string{"on two-shot", "on kernel"}
				}
				for _, s := range named {
					if !strings.Contains(serr.Error(), s) {
						return fmt.Errorf("%v %s: the mismatch error does not name the argument (want %q in it): %v", kind, algo, s, serr)
					}
				}
				got := make([]byte, out.Len)
				if err := w.Read(ctx, got, out.Span); err != nil {
					return err
				}
				if !bytes.Equal(got, fill) {
					return fmt.Errorf("%v %s: the mismatched call wrote into the output", kind, algo)
				}
				fmt.Printf("GPU mismatch (%s) %v %-8s: reported, output untouched: %v\n", variant, kind, algo, serr)
				// The group goes on: a matching call runs and is right.
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				if err := run(coll.Float32, 4*elems/2, algo); err != nil {
					return fmt.Errorf("%v %s after the mismatch: %w", kind, algo, err)
				}
				if err := w.Synchronize(ctx); err != nil {
					return fmt.Errorf("%v %s after the mismatch: %w", kind, algo, err)
				}
				if kind == coll.AllReduce {
					sd := make([][]byte, n)
					for r := range sd {
						sd[r] = arValues(coll.Float32, elems*n, uint64(r+1))[:4*elems/2]
					}
					want := make([]byte, 4*elems/2)
					if err := reduce.ReduceN(want, sd, coll.Float32, coll.Sum); err != nil {
						return err
					}
					got := make([]byte, len(want))
					if err := w.Read(ctx, got, coll.Span{Ptr: out.Ptr, Len: int64(len(want))}); err != nil {
						return err
					}
					if !bytes.Equal(got, want) {
						return fmt.Errorf("%v %s after the mismatch: wrong result", kind, algo)
					}
				}
			}
		}
	}
	return nil
}
