package symmem

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

func init() { roles["bench"] = roleBench }

// TestBenchAllGather measures the direct all-gather against memcpy of the
// same bytes in the same process (issue 3's goal: busbw >= 70% of memcpy at
// 64 MiB). It runs only with SYMMEM_BENCH=1 (ranks: SYMMEM_BENCH_RANKS,
// default 2; size: SYMMEM_BENCH_BYTES, default 64 MiB):
//
//	SYMMEM_BENCH=1 go test -run TestBenchAllGather -v .
func TestBenchAllGather(t *testing.T) {
	if os.Getenv("SYMMEM_BENCH") != "1" {
		t.Skip("set SYMMEM_BENCH=1 to run the all-gather benchmark")
	}
	n := envInt("SYMMEM_BENCH_RANKS", 2)
	res := spawn(t, n, "bench", "SYMMEM_BENCH_BYTES="+strconv.Itoa(envInt("SYMMEM_BENCH_BYTES", 64<<20)))
	expectOK(t, res)
	t.Logf("rank 0:\n%s", res[0].out)
}

func roleBench(ctx context.Context) error {
	w, err := Init(ctx, Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	n, me := w.Size(), w.Rank()
	total := int64(envInt("SYMMEM_BENCH_BYTES", 64<<20))
	total -= total % int64(4*n)
	slice := total / int64(n)
	g := w.World()
	b, err := allocBufs(ctx, g, total)
	if err != nil {
		return err
	}
	in, out := b.in.Bytes(), b.out.Bytes()
	for i := range in {
		in[i] = byte(i + me)
	}
	clear(out)
	const iters = 20
	barrier := func() error {
		_, err := g.AllReduce(ctx, coll.Span{Ptr: b.out.Ptr, Len: 4}, coll.Span{Ptr: b.in.Ptr, Len: 4}, coll.Int32, coll.Sum)
		return err
	}
	// mean runs f iters times back to back (after 2 warm-up runs and a
	// barrier, so all ranks run at once) and returns the mean time.
	mean := func(f func() error) (time.Duration, error) {
		for range 2 {
			if err := f(); err != nil {
				return 0, err
			}
		}
		if err := barrier(); err != nil {
			return 0, err
		}
		start := time.Now()
		for range iters {
			if err := f(); err != nil {
				return 0, err
			}
		}
		return time.Since(start) / iters, nil
	}
	// Baselines: a memcpy of the whole gathered size in this process, (a)
	// on every rank at once, as the ranks run during a collective; (b) on
	// rank 0 alone while the others wait.
	memcpy, _ := mean(func() error { copy(out, in); return nil })
	solo, err := mean(func() error {
		if me == 0 {
			copy(out, in)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := barrier(); err != nil {
		return err
	}
	ag, err := mean(func() error {
		_, err := g.AllGather(ctx, b.out.Span, coll.Span{Ptr: b.in.Ptr, Len: slice}, coll.Uint8)
		return err
	})
	if err != nil {
		return err
	}
	agIn, err := mean(func() error {
		_, err := g.AllGather(ctx, b.out.Span, coll.Span{Ptr: b.out.Ptr + uint64(int64(me)*slice), Len: slice}, coll.Uint8)
		return err
	})
	if err != nil {
		return err
	}
	gbs := func(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }
	bus := coll.BusFactor(coll.AllGather, n)
	mc := gbs(total, memcpy)
	fmt.Printf("ranks=%d size=%d B, mean of %d: memcpy of %d B on every rank at once: %v = %.2f GB/s per rank", n, total, iters, total, memcpy, mc)
	if me == 0 {
		fmt.Printf("; on rank 0 alone: %v = %.2f GB/s", solo, gbs(total, solo))
	}
	fmt.Println()
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"all_gather out-of-place", ag}, {"all_gather in-place", agIn}} {
		alg := gbs(total, r.d)
		fmt.Printf("%-24s time=%v algbw=%.2f GB/s busbw=%.2f GB/s busbw/memcpy(at once)=%.0f%% busbw/memcpy(alone)=%.0f%%\n",
			r.name, r.d, alg, alg*bus, 100*alg*bus/mc, 100*alg*bus/gbs(total, solo))
	}
	return nil
}
