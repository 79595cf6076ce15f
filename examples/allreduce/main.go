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
	"errors"
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
	// Write returns once the input is in the buffer and visible to the
	// peers (on a GPU too), so the collective below reads it.
	mine := make([]byte, 4*count)
	fill(mine, float32(w.Rank()+1))
	if err := w.Write(ctx, buf.Span, mine); err != nil {
		return err
	}
	path, err := g.AllReduce(ctx, buf.Span, buf.Span, coll.Float32, coll.Sum)
	if err != nil {
		return err
	}
	got := make([]byte, 4*count)
	if err := w.Read(ctx, got, buf.Span); err != nil { // waits for the GPU
		return err
	}
	want := float32(w.Size() * (w.Size() + 1) / 2)
	fmt.Printf("rank %d: symmetric all-reduce on %s -> %v via %v\n", w.Rank(), w.Backend(), first(got), path)
	if first(got) != want {
		return fmt.Errorf("got %v, want %v", first(got), want)
	}

	// Ordinary memory works too (the CPU backend stages it through the
	// pool, the GPU backend runs it on plain NCCL) and the path says so.
	plain, err := w.AllocLocal(4 * count)
	if err != nil {
		return err
	}
	defer w.Free(plain)
	if err := w.Write(ctx, plain.Span, mine); err != nil {
		return err
	}
	path, err = g.AllReduce(ctx, plain.Span, plain.Span, coll.Float32, coll.Sum)
	if errors.Is(err, symmem.ErrNotSupported) {
		fmt.Printf("rank %d: ordinary-memory all-reduce not available here: %v\n", w.Rank(), err)
		return nil
	}
	if err != nil {
		return err
	}
	if err := w.Read(ctx, got, plain.Span); err != nil {
		return err
	}
	fmt.Printf("rank %d: ordinary-memory all-reduce -> %v via %v\n", w.Rank(), first(got), path)
	if first(got) != want {
		return fmt.Errorf("ordinary memory: got %v, want %v", first(got), want)
	}
	return nil
}

func fill(b []byte, v float32) {
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
}

func first(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
