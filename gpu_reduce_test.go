package symmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// symmem's reduction kernels, bit-exact (TestGPUWorldReduceKernel).

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
	for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention, coll.AlgoLL} {
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
	fmt.Printf("GPU reduction kernels: %d cases, %d wrong, %d refused (kernel, two-shot, lc, ll; sum and avg; bit-exact against reduce.ReduceN + Finish)\n", cases, bad, refused)
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
