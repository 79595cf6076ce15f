package symmem

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

func init() { roles["gpustreams"] = roleGPUStreams }

// TestGPUWorldStreams: one group's calls spread over two caller streams
// that nothing orders (FSDP2 runs its all-gathers and reduce-scatters so),
// each rank holding back a different stream: the calls must still run in
// the order they were made, on every rank, with the right data (the
// backend orders a group's calls across streams, streams.follow).
func TestGPUWorldStreams(t *testing.T) { gpuSpawn(t, "gpustreams") }

// roleGPUStreams issues, per round, an in-place all-gather on stream A and
// then a reduce-scatter on stream B, with a long fill queued first on A on
// even ranks and on B on odd ones (swapped every round): without ordering,
// ranks would run the two calls in opposite orders.
func roleGPUStreams(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g, err := w.NewGroup(ctx, "streams", w.World().Ranks())
	if err != nil {
		return err
	}
	n, me := int64(g.Size()), int64(g.Rank())
	const slice = 1 << 20 // bytes per rank
	bufs, err := gpuAlloc(ctx, g, slice*n, slice*n, slice)
	if err != nil {
		return err
	}
	agOut, rsIn, rsOut := bufs[0], bufs[1], bufs[2]
	const busyBytes = 1 << 30 // a fill of 1 GiB: about 0.4 ms of the GPU, ahead of the held-back call
	busy, err := w.AllocLocal(busyBytes)
	if err != nil {
		return err
	}
	defer w.Free(busy)
	cctx := w.be.(*cuda.Backend).Context()
	var st [2]*cudadrv.Stream
	for i := range st {
		if st[i], err = cudadrv.NewStream(cctx, 0); err != nil {
			return err
		}
		defer st[i].Destroy() // after the group's Close below
	}
	defer g.Close(ctx)
	agIn := coll.Span{Ptr: agOut.Ptr + uint64(me*slice), Len: slice}
	count := int64(slice / 4)
	for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoAuto} {
		var wrong int64
		rounds := 0
		for round := 0; round < 20; round++ {
			sd, err := seedsOf(ctx, g)
			if err != nil {
				return err
			}
			mine := make([]byte, slice)
			fillSeed(mine, sd[me])
			if err := w.Write(ctx, agIn, mine); err != nil {
				return err
			}
			if err := w.Write(ctx, coll.Span{Ptr: rsIn.Ptr, Len: slice * n}, smallInts(sd[me], count*n)); err != nil {
				return err
			}
			if err := g.Barrier(ctx); err != nil {
				return err
			}
			hold := st[(me+int64(round))%2]
			p := cudadrv.NewProgram(2)
			p.SetContext(cctx)
			p.Memset32(hold.Handle(), busy.Ptr, uint32(round), busyBytes/4)
			if err := p.Exec(); err != nil {
				return err
			}
			_, aerr := g.AllGather(ctx, coll.Span{Ptr: agOut.Ptr, Len: slice * n}, agIn, coll.Float32, WithAlgo(algo), WithStream(st[0].Handle()))
			_, rerr := g.ReduceScatter(ctx, coll.Span{Ptr: rsOut.Ptr, Len: slice}, coll.Span{Ptr: rsIn.Ptr, Len: slice * n}, coll.Float32, coll.Sum,
				WithAlgo(algo), WithStream(st[1].Handle()))
			for _, s := range st {
				if err := s.Wait(ctx, 30*time.Second); err != nil {
					return fmt.Errorf("%s round %d: %w (all-gather: %v, reduce-scatter: %v)", algo, round, err, aerr, rerr)
				}
			}
			if errors.Is(aerr, ErrRefused) || errors.Is(aerr, ErrNotSupported) || errors.Is(rerr, ErrRefused) || errors.Is(rerr, ErrNotSupported) {
				fmt.Printf("GPU streams %-6s: skipped: all-gather %v, reduce-scatter %v\n", algo, aerr, rerr)
				break
			}
			if aerr != nil || rerr != nil {
				return fmt.Errorf("%s round %d: all-gather: %v, reduce-scatter: %v", algo, round, aerr, rerr)
			}
			host := make([]byte, slice*n)
			if err := w.Read(ctx, host, coll.Span{Ptr: agOut.Ptr, Len: slice * n}); err != nil {
				return err
			}
			want := make([]byte, slice)
			for r := int64(0); r < n; r++ {
				fillSeed(want, sd[r])
				for i := range want {
					if host[r*slice+int64(i)] != want[i] {
						wrong++
					}
				}
			}
			got := make([]byte, slice)
			if err := w.Read(ctx, got, coll.Span{Ptr: rsOut.Ptr, Len: slice}); err != nil {
				return err
			}
			sum := make([]float32, count)
			for r := int64(0); r < n; r++ {
				v := smallInts(sd[r], count*n)[me*slice : (me+1)*slice]
				for i := range sum {
					sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(v[4*i:]))
				}
			}
			for i := range sum {
				if math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])) != sum[i] {
					wrong++
				}
			}
			rounds++
		}
		all, err := sumWrong(ctx, g, wrong)
		if err != nil {
			return err
		}
		fmt.Printf("GPU streams %-6s: %d rounds of all-gather on stream A then reduce-scatter on stream B, ranks holding back different streams: %d wrong\n", algo, rounds, all)
		if all != 0 {
			return fmt.Errorf("%s: %d wrong elements with the calls on two streams", algo, all)
		}
	}
	return nil
}

// smallInts is count float32 values from seed, small integers (sums of a
// few ranks are exact).
func smallInts(seed uint64, count int64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, 4*count)
	for i := int64(0); i < count; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.IntN(64))))
	}
	return b
}
