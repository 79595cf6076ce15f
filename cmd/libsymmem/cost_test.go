package main

import (
	"context"
	"net"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

// BenchmarkGoAllReduce is the Go call the Python package's all_reduce wraps,
// for the host-cost comparison (scripts/python-cost.sh): a world of one
// rank on the CPU backend, 1024 float32 in pool memory, out of place.
func BenchmarkGoAllReduce(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := rendezvous.Env{Rank: 0, WorldSize: 1, LocalRank: 0, LocalWorldSize: 1, MasterAddr: "127.0.0.1",
		MasterPort: port, Token: rendezvous.NewToken(), JobID: rendezvous.NewJobID()}
	b.Setenv(rendezvous.VarStoreHosted, "")
	ctx := context.Background()
	w, err := symmem.Init(ctx, symmem.Options{Backend: "cpu", Env: &env})
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
	b.ResetTimer()
	for b.Loop() {
		if _, err := g.AllReduce(ctx, out.Span, in.Span, coll.Float32, coll.Sum); err != nil {
			b.Fatal(err)
		}
	}
}
