package worldtarget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/launch"
)

// The test re-executes its own binary as the ranks of a real job started by
// package launch; TestMain runs the rank role when the variable is set.
const roleEnv = "WORLDTARGET_TEST_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "1" {
		if err := rank(); err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rank checks the target's own contract, then runs a small sweep with
// symmetric and with ordinary memory and fails on any wrong element.
func rank() error {
	ctx := context.Background()
	w, err := symmem.Init(ctx, symmem.Options{Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	t, err := New(ctx, w)
	if err != nil {
		return err
	}
	defer t.Close()
	s, err := t.Alloc(4096, true)
	if err != nil {
		return err
	}
	if err := t.Write(coll.Span{Ptr: s.Ptr + 4000, Len: 200}, make([]byte, 200)); err == nil {
		return errorf("write past the end of a buffer was accepted")
	}
	if err := t.CheckAlgo(coll.AllGather, coll.AlgoCE); err == nil || !strings.Contains(err.Error(), "valid: auto, direct") {
		return errorf("CheckAlgo(ce) = %v", err)
	}
	// Captures every rank refuses wrap ErrNotSupported (a refused row in
	// the sweep, which then goes on; an out-of-place broadcast ended
	// `symmem bench -G` and `symmem tune -G` before).
	half := coll.Span{Ptr: s.Ptr, Len: 64}
	for _, c := range []struct {
		k       coll.Kind
		out, in coll.Span
		want    string
	}{
		{coll.Broadcast, coll.Span{Ptr: s.Ptr + 2048, Len: 64}, half, "out-of-place broadcast"},
		{coll.AllGather, coll.Span{Ptr: s.Ptr, Len: 128}, half, "need the cuda backend"},
	} {
		if c.k == coll.AllGather && w.Backend() != "cpu" {
			continue
		}
		if _, err := t.Capture(2, c.k, c.out, c.in, 16, coll.Float32, coll.Sum, 0, coll.AlgoAuto); !errors.Is(err, symmem.ErrNotSupported) || !strings.Contains(err.Error(), c.want) {
			return errorf("Capture(%v) = %v, want ErrNotSupported saying %q", c.k, err, c.want)
		}
	}
	if err := t.Free(s); err != nil {
		return err
	}
	if err := checkMemcpy(t, parallelCopy+4096); err != nil { // split over threads on the CPU backend
		return err
	}
	// The overlap benchmark needs a GPU: on the CPU backend it says so.
	if w.Backend() == "cpu" {
		if _, err := NewOverlap(t, time.Second); !errors.Is(err, symmem.ErrNotSupported) || !strings.Contains(err.Error(), "needs the cuda backend") {
			return errorf("NewOverlap on the cpu backend = %v", err)
		}
	}
	for _, plain := range []bool{false, true} {
		cfg := bench.Config{Ops: []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast},
			Sizes: []int64{1 << 10, 1 << 20}, DType: coll.BFloat16, RedOp: coll.Avg, Root: 1, OutOfPlace: true,
			InPlace: true, Plain: plain, Check: true, Iters: 2, Warmup: 1, Seed: 7}
		rep, err := bench.Run(t, cfg)
		if err != nil {
			return err
		}
		if n := rep.WrongTotal(); n != 0 {
			var b bytes.Buffer
			bench.WriteTable(&b, rep)
			return errorf("%d wrong elements (plain=%v):\n%s", n, plain, b.String())
		}
		for _, r := range rep.Results {
			if r.OutOfPlace.Staged != plain {
				return errorf("%s: staged=%v with plain=%v", r.Op, r.OutOfPlace.Staged, plain)
			}
		}
	}
	return nil
}

func errorf(f string, a ...any) error { return fmt.Errorf(f, a...) }

func TestTwoRanks(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	code, err := launch.Run(ctx, launch.Config{N: 2, Prog: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{roleEnv + "=1"}, Stdout: &out, Stderr: &out})
	if err != nil || code != 0 {
		t.Fatalf("job failed (code %d): %v\n%s", code, err, out.String())
	}
}

// checkMemcpy copies n bytes between two of the target's buffers, at an
// offset inside each, and compares (on the CPU backend, from parallelCopy
// bytes, split over threads).
func checkMemcpy(t *Target, n int64) error {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8)) // several threads per rank
	if t.w.HostMemory() && t.MemcpyThreads() < 2 {
		return errorf("MemcpyThreads = %d with GOMAXPROCS 8: the split copy is not exercised", t.MemcpyThreads())
	}
	src, err := t.Alloc(n+1024, true)
	if err != nil {
		return err
	}
	defer t.Free(src)
	dst, err := t.Alloc(n+1024, true)
	if err != nil {
		return err
	}
	defer t.Free(dst)
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + 1 + i>>11)
	}
	s, d := coll.Span{Ptr: src.Ptr + 256, Len: n}, coll.Span{Ptr: dst.Ptr + 512, Len: n}
	if err := t.Write(s, want); err != nil {
		return err
	}
	if err := t.Memcpy(d, s); err != nil {
		return err
	}
	got := make([]byte, n)
	if err := t.Read(got, d); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errorf("Memcpy of %d bytes: the copy differs", n)
	}
	return nil
}
