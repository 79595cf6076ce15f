package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/rendezvous"
)

// TestGPUBench runs the bench harness sweep through this Target: symmetric
// buffers with nccl, nccl-window, ce, auto; then plain NCCL on ordinary
// buffers. Reports go to $SYMMEM_BENCH_DIR (if set) and stdout.
func TestGPUBench(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		sizes, _ := bench.Sizes(4<<10, 1<<30, 4)
		// Every rank must pass the same Config: rank 0's seed for all.
		sd, err := tg.ExchangeFloat64([]float64{float64(uint64(time.Now().UnixNano()) >> 11)})
		if err != nil {
			t.Fatal(err)
		}
		base := bench.Config{Ops: []coll.Kind{coll.AllGather}, Sizes: sizes, DType: coll.BFloat16, OutOfPlace: true, InPlace: true,
			Check: true, Iters: 200, MinIters: 5, Warmup: 10, Budget: 150 * time.Millisecond, Seed: uint64(sd[0][0])}
		sym := base
		sym.Algos = algosOf(tg)
		plain := base
		plain.Plain, plain.Algos = true, []coll.Algo{coll.AlgoNCCL}
		runs := []struct {
			name string
			cfg  bench.Config
		}{{"sym", sym}}
		if tg.G.nccl.comm != nil {
			runs = append(runs, struct {
				name string
				cfg  bench.Config
			}{"plain", plain})
		}
		for _, r := range runs {
			rep, err := bench.Run(tg, r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if env.Rank == 0 {
				var b strings.Builder
				bench.WriteTable(&b, rep)
				fmt.Printf("BENCH %s\n%s\n", r.name, b.String())
				if dir := os.Getenv("SYMMEM_BENCH_DIR"); dir != "" && r.name == "sym" {
					f, err := os.Create(filepath.Join(dir, "bench-"+r.name+".json"))
					if err == nil {
						bench.WriteJSON(f, rep)
						f.Close()
					}
				}
			}
			if w := rep.WrongTotal(); w != 0 {
				t.Errorf("bench %s: %d wrong elements", r.name, w)
			}
		}
	})
}

// TestGPUCETune times copy-engine variants and the host cost of issuing one
// all-gather, for the tuning table.
func TestGPUCETune(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		n := int64(tg.Size())
		const maxBytes = 1 << 30
		out, err := tg.Alloc(maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tg.Alloc(maxBytes/n, true)
		if err != nil {
			t.Fatal(err)
		}
		kt := func(ctas int) ceTune { tu := defaultTune(); tu.kernCTAs = ctas; return tu }
		variants := []struct {
			name string
			tu   ceTune
		}{
			{"kernel-4", kt(4)},
			{"kernel-8", kt(8)},
			{"kernel-16", kt(16)},
			{"kernel-32", kt(32)},
			{"kernel-64", kt(64)},
			{"default", defaultTune()},
			{"push-ls-batch", ceTune{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 0, batch: true}},
			{"pull", ceTune{mode: modePull, split: 1, splitMin: 1 << 62, sideLocal: 4 << 20}},
			{"pull-ls", ceTune{mode: modePull, split: 1, splitMin: 1 << 62, sideLocal: 0}},
			{"push", ceTune{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 4 << 20}},
			{"push-ls", ceTune{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 0}},
			{"both-ls", ceTune{mode: modeBoth, split: 1, splitMin: 1 << 62, sideLocal: 0}},
			{"pull-split2-ls", ceTune{mode: modePull, split: 2, splitMin: 0, sideLocal: 0}},
		}
		sizes := []int64{64 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20, 1 << 30}
		if v := os.Getenv("SYMMEM_TUNE_SIZES"); v != "" {
			sizes = nil
			for _, f := range strings.Split(v, ",") {
				b, err := bench.ParseSize(f)
				if err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, b)
			}
		}
		if v := os.Getenv("SYMMEM_TUNE_VARIANTS"); v != "" {
			keep := variants[:0]
			for _, x := range variants {
				if strings.Contains(","+v+",", ","+x.name+",") {
					keep = append(keep, x)
				}
			}
			variants = keep
		}
		evStart, err := cuda.NewEvent(tg.B.ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		evEnd, err := cuda.NewEvent(tg.B.ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		defer evStart.Destroy()
		defer evEnd.Destroy()
		logf(env, "CETUNE %-15s %8s %5s %10s %8s %10s %10s %8s\n", "variant", "size", "place", "wall_us", "busbw", "issue_us", "gpu_us", "gpubusbw")
		tag := os.Getenv("SYMMEM_TUNE_TAG")
		for _, v := range variants {
			v.name += tag
			tg.G.runMu.Lock()
			tg.G.tune = v.tu
			tg.G.runMu.Unlock()
			if tg.G.broken != nil {
				t.Fatalf("group broken before variant %s: %v", v.name, tg.G.broken)
			}
			for _, size := range sizes {
				if strings.Contains(v.name, "split") && size < 8<<20 {
					continue
				}
				algo := coll.AlgoCE
				if strings.HasPrefix(v.name, "kernel") {
					if size > 64<<20 || tg.G.kargs == nil {
						continue
					}
					algo = coll.AlgoKernel
				}
				for _, inPlace := range []bool{true, false} {
					count := size / 2 / n
					slice := count * 2
					inS := in
					if inPlace {
						inS = coll.Span{Ptr: out.Ptr + uint64(int64(tg.Rank())*slice), Len: slice}
					}
					req := tg.Request(tg.G, tg.gid, coll.AllGather, coll.Span{Ptr: out.Ptr, Len: size}, coll.Span{Ptr: inS.Ptr, Len: slice}, count, coll.BFloat16, coll.Sum, 0, algo)
					iters := 200
					if size >= 256<<20 {
						iters = 40
					}
					var werr error
					for i := 0; i < 5 && werr == nil; i++ {
						_, werr = tg.G.Run(context.Background(), req)
					}
					// Every rank learns whether any rank failed (a variant
					// the driver refuses, e.g. capture), and skips it.
					ok, err := tg.ExchangeFloat64([]float64{b2f(werr == nil)})
					if err != nil {
						t.Fatal(err)
					}
					if werr != nil || ok[0][0] == 0 || ok[len(ok)-1][0] == 0 {
						logf(env, "CETUNE %-15s %8s variant failed: %v\n", v.name, bench.FormatSize(size), werr)
						if werr != nil && tg.G.broken != nil {
							t.Fatalf("variant %s broke the group: %v", v.name, werr)
						}
						continue
					}
					if err := tg.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := tg.Barrier(); err != nil {
						t.Fatal(err)
					}
					var issue time.Duration
					if err := evStart.Record(tg.B.stream); err != nil {
						t.Fatal(err)
					}
					t0 := time.Now()
					for i := 0; i < iters; i++ {
						a := time.Now()
						if _, err := tg.G.Run(context.Background(), req); err != nil {
							t.Fatal(err)
						}
						issue += time.Since(a)
					}
					if err := evEnd.Record(tg.B.stream); err != nil {
						t.Fatal(err)
					}
					if err := tg.Sync(); err != nil {
						t.Fatal(err)
					}
					per := time.Since(t0).Seconds() / float64(iters)
					ms, err := cuda.Elapsed(evStart, evEnd)
					if err != nil {
						t.Fatal(err)
					}
					all, err := tg.ExchangeFloat64([]float64{per, issue.Seconds() / float64(iters), ms / 1e3 / float64(iters)})
					if err != nil {
						t.Fatal(err)
					}
					var slow, iss, gpu float64
					for _, x := range all {
						slow, iss, gpu = max(slow, x[0]), max(iss, x[1]), max(gpu, x[2])
					}
					_, bus := bench.Bandwidth(coll.AllGather, int(n), size, slow*1e6)
					_, gbus := bench.Bandwidth(coll.AllGather, int(n), size, gpu*1e6)
					place := "oop"
					if inPlace {
						place = "inpl"
					}
					logf(env, "CETUNE %-15s %8s %5s %10.2f %8.1f %10.2f %10.2f %8.1f\n", v.name, bench.FormatSize(size), place, slow*1e6, bus, iss*1e6, gpu*1e6, gbus)
				}
			}
		}
		tg.G.tune = defaultTune()
	})
}

var _ = errors.Is

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
