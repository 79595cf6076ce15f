package symmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/reduce"
)

// CUDA-graph capture and replay of every path (TestGPUWorldGraph).

// roleGPUGraph captures one in-place all-gather per forced algorithm into a
// CUDA graph on a caller stream (WithStream), then replays it: once per
// fresh input (checked after each) and 50 times back to back.
func roleGPUGraph(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
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
// against reduce.ReduceN (ll also on buffers off 16 bytes). lc's first call in the group happens inside the
// capture and must be refused (its staging is allocated at the first call,
// which a capture cannot do), naming what to do; after one eager call it
// captures.
func graphReductions(ctx context.Context, w *World, g *Group, s *cudadrv.Stream, in, out Buffer) error {
	n, me := g.Size(), g.Rank()
	cctx := w.be.(*cuda.Backend).Context()
	for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention, coll.AlgoLL} {
		// shift moves both buffers off 16 bytes (4 and 12): ll stages them
		// through stream-ordered scratch, which the capture must record.
		for _, cs := range []struct{ nb, shift int64 }{{48 << 10, 0}, {24<<20 + 96, 0}, {48 << 10, 4}} {
			nb := cs.nb
			if algo == coll.AlgoLL && nb > 48<<10 {
				continue // larger than its area: refused
			}
			if cs.shift != 0 && algo != coll.AlgoLL {
				continue
			}
			src := coll.Span{Ptr: in.Ptr + uint64(cs.shift), Len: nb}
			dst := coll.Span{Ptr: out.Ptr + uint64(3*cs.shift), Len: nb}
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
			fmt.Printf("GPU graph %-12s all_reduce %9d bytes (shift %d): 3 replays on fresh inputs, %d wrong\n", algo, nb, cs.shift, sum)
			if sum != 0 {
				return fmt.Errorf("%s all-reduce %d bytes: %d wrong results after graph replay", algo, nb, sum)
			}
		}
	}
	return nil
}
