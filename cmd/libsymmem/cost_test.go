package main

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// The host-cost layers of one all-reduce, bottom up (scripts/python-cost.sh
// and scripts/gpu-python.sh run them side by side): a world of one rank,
// 1024 float32 in pool memory, out of place (the 1-rank in-place one-shot
// plan is refused by package plan today).
//
//	BenchmarkGoAllReduce   the Go call, symmem.Group.AllReduce
//	BenchmarkABIAllReduce  the C ABI's Go side (handle lookup, argument
//	                       decoding, last path) without the cgo entry
//	testdata/abi_cost.c    the exported function called from C
//	python/bench/host_cost.py, python/tests/gpu_torch.py cost: ctypes, the package
//
// Variants: cpu (the CPU backend); cpu-stream (the same with a stream
// argument, which the CPU backend ignores: the ABI's per-call option work
// without a GPU); cuda (the GPU backend on its own
// stream); cuda-legacy (on CU_STREAM_LEGACY, torch's default stream, as the
// Python package passes it). GPU variants are skipped without a usable GPU.
// Calls are timed in batches of costBatch; between batches, untimed, the GPU
// drains, so ns/op is host (enqueue) time, never a full launch queue.
const costBatch = 200

const cuStreamLegacyHandle = 0x1 // CU_STREAM_LEGACY

var costVariants = []struct {
	name, backend string
	stream        uint64
}{{"cpu", "cpu", 0}, {"cpu-stream", "cpu", cuStreamLegacyHandle}, {"cuda", "cuda", 0}, {"cuda-legacy", "cuda", cuStreamLegacyHandle}}

func BenchmarkGoAllReduce(b *testing.B) {
	for _, v := range costVariants {
		b.Run(v.name, func(b *testing.B) {
			c := newCostWorld(b, v.backend)
			var opts []symmem.CallOption
			if v.stream != 0 {
				opts = append(opts, symmem.WithStream(v.stream))
			}
			g, ctx := c.w.World(), context.Background()
			var path coll.Path
			var err error
			c.loop(b, func() {
				if path, err = g.AllReduce(ctx, c.out, c.in, coll.Float32, coll.Sum, opts...); err != nil {
					b.Fatal(err)
				}
			})
			b.Logf("path: %v", path)
		})
	}
}

func BenchmarkABIAllReduce(b *testing.B) {
	for _, v := range costVariants {
		b.Run(v.name, func(b *testing.B) {
			c := newCostWorld(b, v.backend)
			w := &world{w: c.w}
			w.id = handles.add(w)
			gh := handles.add(&group{w: w, g: c.w.World()})
			w.own(gh)
			defer w.drop()
			a := args{kind: coll.AllReduce, in: c.in.Ptr, out: c.out.Ptr, count: uint64(c.in.Len / 4), dtype: 7, stream: v.stream,
				algo: coll.AlgoAuto}
			b.ReportAllocs()
			c.loop(b, func() {
				if rc := collective(gh, a); rc < 0 {
					b.Fatalf("status %d", rc)
				}
			})
		})
	}
}

// TestABICollectiveNoAllocs: the ABI's Go side of a CPU all-reduce (handle
// lookup, decoding, options, the user API call, the last path) allocates
// nothing per call, with or without a stream and an algorithm.
func TestABICollectiveNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := newCostWorld(t, "cpu")
	w := &world{w: c.w}
	w.id = handles.add(w)
	gh := handles.add(&group{w: w, g: c.w.World()})
	w.own(gh)
	defer w.drop()
	base := args{kind: coll.AllReduce, in: c.in.Ptr, out: c.out.Ptr, count: uint64(c.in.Len / 4), dtype: 7, algo: coll.AlgoAuto}
	withStream, withAlgo := base, base
	withStream.stream = cuStreamLegacyHandle
	withAlgo.stream, withAlgo.algo = cuStreamLegacyHandle, coll.AlgoDirect
	for name, a := range map[string]args{"auto": base, "stream": withStream, "stream and algo": withAlgo} {
		var rc int
		if n := testing.AllocsPerRun(50, func() { rc = int(collective(gh, a)) }); n != 0 || rc < 0 {
			t.Errorf("%s: %v allocations per call (status %d), want 0", name, n, rc)
		}
	}
}

// costWorld is a world of one with two registered pool buffers.
type costWorld struct {
	w       *symmem.World
	in, out coll.Span
	drain   func() error
}

func newCostWorld(b testing.TB, backend string) *costWorld {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := rendezvous.Env{Rank: 0, WorldSize: 1, LocalRank: 0, LocalWorldSize: 1, MasterAddr: "127.0.0.1",
		MasterPort: port - 1, StorePort: port, Token: rendezvous.NewToken(), JobID: rendezvous.NewJobID()}
	b.Setenv(rendezvous.VarStoreHosted, "")
	ctx := context.Background()
	w, err := symmem.Init(ctx, symmem.Options{Backend: backend, Env: &env})
	if errors.Is(err, symmem.ErrNotSupported) {
		b.Skipf("no %s backend here: %v", backend, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	sc, err := w.World().OpenScope()
	if err != nil {
		b.Fatal(err)
	}
	in, err := sc.Alloc(4096)
	if err != nil {
		b.Fatal(err)
	}
	out, err := sc.Alloc(4096)
	if err != nil {
		b.Fatal(err)
	}
	if err := sc.End(ctx); err != nil {
		b.Fatal(err)
	}
	c := &costWorld{w: w, in: in.Span, out: out.Span, drain: func() error { return nil }}
	if backend == "cuda" {
		// Every stream of the device: the legacy stream is not the backend's.
		cu, err := cudadrv.Retain(0)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cu.Release() })
		c.drain = func() error {
			if err := w.Synchronize(ctx); err != nil {
				return err
			}
			return cu.Synchronize()
		}
	}
	return c
}

// loop times f per call in batches of costBatch, draining the GPU untimed
// between batches.
func (c *costWorld) loop(b *testing.B, f func()) {
	for range costBatch {
		f()
	}
	if err := c.drain(); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		f()
		if i++; i%costBatch == 0 {
			b.StopTimer()
			if err := c.drain(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	if err := c.drain(); err != nil {
		b.Fatal(err)
	}
}
