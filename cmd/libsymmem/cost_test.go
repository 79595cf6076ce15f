package main

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

// BenchmarkGoAllReduce is the Go call the Python package's all_reduce wraps,
// for the host-cost comparison (scripts/python-cost.sh, scripts/gpu-python.sh):
// a world of one rank, 1024 float32 in pool memory, out of place (the 1-rank
// in-place one-shot plan is refused by package plan today). cpu: the CPU
// backend; cuda: the GPU backend on its own stream (host time per call,
// synchronised after the loop, so ns/op is host time per call), skipped
// without a usable GPU.
func BenchmarkGoAllReduce(b *testing.B) {
	for _, backend := range []string{"cpu", "cuda"} {
		b.Run(backend, func(b *testing.B) { benchAllReduce(b, backend) })
	}
}

func benchAllReduce(b *testing.B, backend string) {
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
	defer w.Close()
	g := w.World()
	sc, err := g.OpenScope()
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
	var path coll.Path
	b.ResetTimer()
	for b.Loop() {
		if path, err = g.AllReduce(ctx, out.Span, in.Span, coll.Float32, coll.Sum); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Synchronize(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("path: %v", path)
}
