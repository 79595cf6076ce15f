// Command allreduce is a minimal symmem program: every rank all-reduces a
// float32 vector held in symmetric memory, then does the same with ordinary
// Go memory (which symmem stages through the pool) and prints the path each
// call took. Run it with the launcher:
//
//	go build -o /tmp/allreduce ./examples/allreduce
//	go run ./cmd/symmem launch -n 2 /tmp/allreduce
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "allreduce:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := symmem.Init(ctx, symmem.Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	const count = 1 << 16

	// Symmetric memory: allocate inside a scope (same sizes on every rank).
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	buf, err := sc.Alloc(4 * count)
	if err != nil {
		return err
	}
	if err := sc.End(ctx); err != nil {
		return err
	}
	fill(buf.Bytes(), float32(w.Rank()+1))
	path, err := g.AllReduce(ctx, buf.Span, buf.Span, coll.Float32, coll.Sum)
	if err != nil {
		return err
	}
	want := float32(w.Size() * (w.Size() + 1) / 2)
	fmt.Printf("rank %d: symmetric all-reduce -> %v via %v\n", w.Rank(), first(buf.Bytes()), path)

	// Ordinary Go memory works too: symmem stages it and says so.
	plain := make([]byte, 4*count)
	fill(plain, float32(w.Rank()+1))
	path, err = g.AllReduce(ctx, symmem.HostSpan(plain), symmem.HostSpan(plain), coll.Float32, coll.Sum)
	if err != nil {
		return err
	}
	fmt.Printf("rank %d: ordinary-memory all-reduce -> %v via %v\n", w.Rank(), first(plain), path)
	if first(buf.Bytes()) != want || first(plain) != want {
		return fmt.Errorf("got %v and %v, want %v", first(buf.Bytes()), first(plain), want)
	}
	return nil
}

func fill(b []byte, v float32) {
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

func first(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
