package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/reduce"
	"github.com/symmem/symmem/rendezvous"
)

func newTarget(t *testing.T, env rendezvous.Env) *Target {
	t.Helper()
	tg, err := NewTarget(context.Background(), env, TargetOptions{Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if env.Rank == 0 {
		fmt.Printf("%sbatch mem ops: %v\n", tg.B.Describe(), cuda.HaveBatchMemOp())
	}
	return tg
}

// fill writes pseudo-random bytes from seed.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for ; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// seeds gives every rank's fresh seed for one case.
func seeds(t *testing.T, tg *Target) []uint64 {
	t.Helper()
	mine := rand.Uint64() ^ uint64(time.Now().UnixNano())
	all, err := tg.ExchangeFloat64([]float64{float64(mine >> 11)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(all))
	for r, v := range all {
		out[r] = uint64(v[0])
	}
	return out
}

func algosOf(tg *Target) []coll.Algo {
	a := []coll.Algo{coll.AlgoCE}
	if tg.G.kargs != nil {
		a = append(a, coll.AlgoKernel)
	}
	if tg.G.nccl.comm != nil {
		a = append(a, coll.AlgoNCCL, coll.AlgoNCCLWindow, coll.AlgoAuto)
	}
	return a
}

// gatherCase runs one all-gather on group g with fresh random data and
// returns the number of wrong bytes summed over ranks.
type gatherCase struct {
	g       *Group
	gid     pool.GroupID
	out, in coll.Span // buffers big enough
	count   int64
	dt      coll.DType
	inPlace bool
	algo    coll.Algo
}

func runGatherCase(t *testing.T, tg *Target, c gatherCase, host, want []byte) (coll.Path, int64) {
	t.Helper()
	n, me := c.g.Size(), c.g.Rank()
	slice := c.count * int64(c.dt.Size())
	total := slice * int64(n)
	sd := seeds(t, tg)
	mine := host[:slice]
	fill(mine, sd[me])
	if err := cuda.Memset8(tg.B.ctx, c.out.Ptr, 0xAB, total+64); err != nil {
		t.Fatal(err)
	}
	in := c.in
	if c.inPlace {
		in = coll.Span{Ptr: c.out.Ptr + uint64(int64(me)*slice), Len: slice}
	}
	if err := tg.Write(in, mine); err != nil {
		t.Fatal(err)
	}
	if err := tg.Barrier(); err != nil {
		t.Fatal(err)
	}
	req := tg.Request(c.g, c.gid, coll.AllGather, coll.Span{Ptr: c.out.Ptr, Len: total}, coll.Span{Ptr: in.Ptr, Len: slice}, c.count, c.dt, coll.Sum, 0, c.algo)
	path, err := c.g.Run(context.Background(), req)
	if errors.Is(err, ErrNCCLInPlaceMisaligned) || errors.Is(err, errKernelAlign) {
		// Refused on every rank alike (same geometry): a known NCCL defect,
		// or the kernel's 16-byte vectors.
		return coll.Path{Algo: c.algo, Reason: "refused: " + err.Error()}, 0
	}
	if err != nil {
		t.Fatalf("%v count=%d %v inPlace=%v: %v", c.algo, c.count, c.dt, c.inPlace, err)
	}
	if err := tg.Sync(); err != nil {
		t.Fatal(err)
	}
	got := host[:total+64]
	if err := tg.Read(got, coll.Span{Ptr: c.out.Ptr, Len: total + 64}); err != nil {
		t.Fatal(err)
	}
	var wrong int64
	for r := 0; r < n; r++ {
		w := want[:slice]
		fill(w, sd[r])
		if !bytes.Equal(got[int64(r)*slice:int64(r+1)*slice], w) {
			for i := range w {
				if got[int64(r)*slice+int64(i)] != w[i] {
					wrong++
				}
			}
		}
	}
	for _, b := range got[total:] {
		if b != 0xAB {
			wrong++ // wrote past the output
		}
	}
	all, err := tg.ExchangeFloat64([]float64{float64(wrong)})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, v := range all {
		sum += int64(v[0])
	}
	return path, sum
}

// TestGPUAllGatherCorrect: fresh random data, 4 KiB..1 GiB, odd counts,
// bf16/fp16/fp32/int8, in-place and out-of-place, every algorithm, and the
// copy-engine variants.
func TestGPUAllGatherCorrect(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		n := int64(tg.Size())
		const maxBytes = 1 << 30
		out, err := tg.Alloc(maxBytes+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tg.Alloc(maxBytes/n+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		host, want := make([]byte, maxBytes+4096), make([]byte, maxBytes/n+4096)
		sizes := []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30}
		dts := []coll.DType{coll.BFloat16, coll.Float16, coll.Float32, coll.Int8}
		cases, bad, refused := 0, 0, 0
		start := time.Now()
		for _, size := range sizes {
			for _, dt := range dts {
				if size == 1<<30 && dt != coll.BFloat16 {
					continue
				}
				// An odd count, and (up to 16 MiB, the kernel's range) one
				// whose slice is a multiple of 16 bytes.
				count := size / int64(dt.Size()) / n
				if count%2 == 0 {
					count--
				}
				counts := []int64{count}
				if size <= 16<<20 {
					counts = append(counts, size/n/16*16/int64(dt.Size()))
				}
				for _, count := range counts {
					for _, inPlace := range []bool{false, true} {
						for _, algo := range algosOf(tg) {
							c := gatherCase{g: tg.G, gid: tg.gid, out: out, in: in, count: count, dt: dt, inPlace: inPlace, algo: algo}
							path, wrong := runGatherCase(t, tg, c, host, want)
							cases++
							if strings.HasPrefix(path.Reason, "refused: ") {
								refused++
							}
							if wrong != 0 {
								bad++
								t.Errorf("all_gather %s count=%d %v inPlace=%v algo=%s (path %s): %d wrong bytes", bench.FormatSize(size), count, dt, inPlace, algo, path.Algo, wrong)
							}
						}
					}
				}
			}
		}
		// Copy-engine variants (push, pull+push, split streams) on odd counts.
		for _, tu := range []ceTune{{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 1 << 20},
			{mode: modeBoth, split: 1, splitMin: 1 << 62, sideLocal: 0},
			{mode: modePull, split: 3, splitMin: 0, sideLocal: 0},
			{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 0, batch: true},
			{mode: modePull, split: 1, splitMin: 1 << 62, sideLocal: 0}} {
			tg.G.runMu.Lock()
			tg.G.tune = tu
			tg.G.runMu.Unlock()
			for _, size := range []int64{4 << 10, 8<<20 + 6, 64 << 20} {
				for _, inPlace := range []bool{false, true} {
					count := size/2/n - 1
					c := gatherCase{g: tg.G, gid: tg.gid, out: out, in: in, count: count, dt: coll.BFloat16, inPlace: inPlace, algo: coll.AlgoCE}
					_, wrong := runGatherCase(t, tg, c, host, want)
					cases++
					if wrong != 0 {
						bad++
						t.Errorf("ce variant %+v size %d inPlace=%v: %d wrong bytes", tu, size, inPlace, wrong)
					}
				}
			}
		}
		tg.G.tune = defaultTune()
		logf(env, "CORRECTNESS all_gather: %d cases, %d wrong, %d refused (NCCL in-place misaligned guard), %.1fs (sizes 4K..1G odd counts, bf16/fp16/fp32/int8, in/out-of-place, algos %v + ce variants)\n",
			cases, bad, refused, time.Since(start).Seconds(), algosOf(tg))
	})
}

// TestGPUTwoGroupsOnePool: two groups share one pool; each gathers in its
// own blocks, alternating, and both stay correct.
func TestGPUTwoGroupsOnePool(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		g2, gid2, err := tg.AddGroup(context.Background(), "second", allRanks(tg.Size()))
		if err != nil {
			t.Fatal(err)
		}
		n := int64(tg.Size())
		o1, err := tg.Alloc(32<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		i1, err := tg.Alloc(16<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		o2, err := tg.AllocIn(gid2, 32<<20)
		if err != nil {
			t.Fatal(err)
		}
		i2, err := tg.AllocIn(gid2, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		host, want := make([]byte, 33<<20), make([]byte, 17<<20)
		for i := 0; i < 6; i++ {
			count := int64(1<<20*(i+1)+1) / n
			for _, c := range []gatherCase{
				{g: tg.G, gid: tg.gid, out: o1, in: i1, count: count, dt: coll.BFloat16, inPlace: i%2 == 0, algo: coll.AlgoCE},
				{g: g2, gid: gid2, out: o2, in: i2, count: count, dt: coll.BFloat16, inPlace: i%2 == 1, algo: coll.AlgoCE},
			} {
				if _, wrong := runGatherCase(t, tg, c, host, want); wrong != 0 {
					t.Errorf("group %s round %d: %d wrong bytes", c.g.Name(), i, wrong)
				}
			}
		}
		st := tg.Pool.Stats()
		logf(env, "TWO GROUPS one pool: ok=%v pool stats %+v, registered world=%d second=%d\n", !t.Failed(), st, tg.G.Registered(), g2.Registered())
	})
}

// TestGPURegistrationMismatch: ranks registering different segments get an
// error wrapping pool.ErrMismatch, quickly, never a hang.
func TestGPURegistrationMismatch(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		bg, _, err := tg.AddGroup(context.Background(), "mismatch", allRanks(tg.Size()))
		if err != nil {
			t.Fatal(err)
		}
		gran := tg.B.gran
		var segs []pool.Segment
		for _, id := range []pool.SegmentID{1001, 1002} {
			base, err := tg.B.prov.CreateSegment(id, gran)
			if err != nil {
				t.Fatal(err)
			}
			segs = append(segs, pool.Segment{ID: id, Base: base, Size: gran})
		}
		seg := segs[env.Rank%2] // rank 0 registers 1001, rank 1 registers 1002
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		err = bg.Register(ctx, seg)
		if !errors.Is(err, pool.ErrMismatch) {
			t.Fatalf("mismatched registration: got %v, want an error wrapping pool.ErrMismatch", err)
		}
		logf(env, "REGISTRATION MISMATCH: error after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		for _, s := range segs {
			if err := tg.B.prov.ReleaseSegment(s.ID); err != nil {
				t.Error(err)
			}
		}
	})
}

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

// TestGPUGraphCapture captures one all-gather per algorithm into a CUDA graph
// on a caller stream, then replays it: once per fresh random input (checked
// after each), and 50 times back to back (signals must not run ahead).
func TestGPUGraphCapture(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		if !cuda.HaveGraphs() {
			t.Skip("driver lacks graph capture")
		}
		n, me := int64(tg.Size()), tg.Rank()
		out, err := tg.Alloc(64<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := cuda.NewStream(tg.B.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			// The group fences the streams it ran on when it closes: s first.
			if err := tg.G.quiesce(context.Background()); err != nil {
				t.Error(err)
			}
			s.Destroy()
		}()
		for _, algo := range algosOf(tg) {
			if algo == coll.AlgoAuto {
				continue
			}
			for _, size := range []int64{64 << 10, 1 << 20, 32 << 20} {
				slice := size / n
				count := slice / 2
				in := coll.Span{Ptr: out.Ptr + uint64(int64(me)*slice), Len: slice} // in-place
				req := tg.Request(tg.G, tg.gid, coll.AllGather, coll.Span{Ptr: out.Ptr, Len: size}, in, count, coll.BFloat16, coll.Sum, 0, algo)
				req.Stream = s.Handle()
				if err := tg.Barrier(); err != nil {
					t.Fatal(err)
				}
				if err := cuda.BeginCapture(tg.B.ctx, s); err != nil {
					t.Fatal(err)
				}
				_, rerr := tg.G.Run(context.Background(), req)
				gr, err := cuda.EndCapture(tg.B.ctx, s)
				if rerr != nil || err != nil {
					t.Fatalf("%s %s: capture: run %v, end %v", algo, bench.FormatSize(size), rerr, err)
				}
				host, want := make([]byte, size), make([]byte, slice)
				check := func(round int) {
					if err := s.Wait(context.Background(), 30*time.Second); err != nil {
						t.Fatalf("%s round %d: %v", algo, round, err)
					}
					if err := tg.Read(host, coll.Span{Ptr: out.Ptr, Len: size}); err != nil {
						t.Fatal(err)
					}
				}
				var wrong int
				for round := 0; round < 4; round++ {
					sd := seeds(t, tg)
					fill(want, sd[me])
					if err := tg.Write(in, want); err != nil {
						t.Fatal(err)
					}
					if err := tg.Barrier(); err != nil {
						t.Fatal(err)
					}
					if err := gr.Launch(s); err != nil {
						t.Fatal(err)
					}
					check(round)
					for r := int64(0); r < n; r++ {
						fill(want, sd[r])
						if !bytes.Equal(host[r*slice:(r+1)*slice], want) {
							wrong++
						}
					}
					if round == 3 {
						// 50 replays back to back: the data stays the same.
						for i := 0; i < 50; i++ {
							if err := gr.Launch(s); err != nil {
								t.Fatal(err)
							}
						}
						check(99)
						for r := int64(0); r < n; r++ {
							fill(want, sd[r])
							if !bytes.Equal(host[r*slice:(r+1)*slice], want) {
								wrong++
							}
						}
					}
				}
				gr.Destroy()
				all, err := tg.ExchangeFloat64([]float64{float64(wrong)})
				if err != nil {
					t.Fatal(err)
				}
				var sum float64
				for _, v := range all {
					sum += v[0]
				}
				logf(env, "GRAPH %-12s %8s: 4 fresh replays + 50 back to back, %v wrong slices\n", algo, bench.FormatSize(size), sum)
				if sum != 0 {
					t.Errorf("%s %s: %v wrong slices after graph replay", algo, bench.FormatSize(size), sum)
				}
			}
		}
	})
}

// TestGPUHostCost measures the CPU time of issuing one small all-gather per
// algorithm: "plan" is the Go work alone (choice + arguments or program, no
// driver call), "issue" a whole Run, timed over bursts of 4 calls right after
// a synchronisation so that a full launch queue never blocks the caller
// (median over 100 bursts), "exec" the driver calls alone (the kernel's
// one cuLaunchKernel, replayed from its built program), and "graph" the host
// time per collective when 32 of them are captured into one CUDA graph and
// replayed with one cuGraphLaunch (bursts of 4 launches).
func TestGPUHostCost(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		n, me := int64(tg.Size()), tg.Rank()
		out, err := tg.Alloc(4<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		logf(env, "HOSTCOST %-12s %6s %9s %9s %9s %9s %9s\n", "algo", "size", "plan_us", "issue_us", "issue_p90", "exec_us", "graph_us")
		for _, algo := range algosOf(tg) {
			for _, size := range []int64{64 << 10, 1 << 20} {
				slice := size / n
				in := coll.Span{Ptr: out.Ptr + uint64(int64(me)*slice), Len: slice}
				req := tg.Request(tg.G, tg.gid, coll.AllGather, coll.Span{Ptr: out.Ptr, Len: size}, in, slice/2, coll.BFloat16, coll.Sum, 0, algo)
				req.Stream = tg.B.stream.Handle()
				// plan: pure Go.
				const planN = 20000
				t0 := time.Now()
				for i := 0; i < planN; i++ {
					a, _, err := tg.G.choose(req)
					if err != nil {
						t.Fatal(err)
					}
					switch a {
					case coll.AlgoKernel:
						err = tg.G.fillKernelArgs(req)
					case coll.AlgoCE:
						err = tg.G.buildAllGather(tg.G.prog, req, req.Stream)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				plan := time.Since(t0).Seconds() / planN
				burst := func(call func() error) []float64 {
					var per []float64
					for round := 0; round < 100; round++ {
						if err := tg.Sync(); err != nil {
							t.Fatal(err)
						}
						if err := tg.Barrier(); err != nil {
							t.Fatal(err)
						}
						t0 := time.Now()
						for i := 0; i < 4; i++ {
							if err := call(); err != nil {
								t.Fatal(err)
							}
						}
						per = append(per, time.Since(t0).Seconds()/4)
					}
					slices.Sort(per)
					return per
				}
				issue := burst(func() error { _, err := tg.G.Run(context.Background(), req); return err })
				exec := []float64{0}
				if algo == coll.AlgoKernel {
					exec = burst(func() error {
						tg.G.runMu.Lock()
						defer tg.G.runMu.Unlock()
						p := tg.G.prog
						p.Reset()
						p.SetContext(tg.B.ctx)
						p.Launch(req.Stream, tg.B.kern.ag, tg.G.kargs, kernelCTAs(slice, tg.G.tune.kernCTAs), kernThreads)
						return p.Exec()
					})
				}
				// graph: 32 collectives captured into one graph, replayed
				// with one cuGraphLaunch; host time per collective.
				const inGraph = 32
				graph := []float64{0}
				if cuda.HaveGraphs() && algo != coll.AlgoAuto {
					if err := tg.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := cuda.BeginCapture(tg.B.ctx, tg.B.stream); err != nil {
						t.Fatal(err)
					}
					var rerr error
					for i := 0; i < inGraph && rerr == nil; i++ {
						_, rerr = tg.G.Run(context.Background(), req)
					}
					gr, err := cuda.EndCapture(tg.B.ctx, tg.B.stream)
					if rerr != nil || err != nil {
						t.Fatalf("%s: capturing %d collectives: run %v, end %v", algo, inGraph, rerr, err)
					}
					graph = burst(func() error { return gr.Launch(tg.B.stream) })
					for i := range graph {
						graph[i] /= inGraph
					}
					if err := tg.Sync(); err != nil {
						t.Fatal(err)
					}
					gr.Destroy()
				}
				all, err := tg.ExchangeFloat64([]float64{plan, issue[len(issue)/2], issue[len(issue)*9/10], exec[len(exec)/2], graph[len(graph)/2]})
				if err != nil {
					t.Fatal(err)
				}
				for r, v := range all {
					logf(env, "HOSTCOST %-12s %6s %9.2f %9.2f %9.2f %9.2f %9.3f  (rank %d)\n", algo, bench.FormatSize(size), v[0]*1e6, v[1]*1e6, v[2]*1e6, v[3]*1e6, v[4]*1e6, r)
				}
			}
		}
		if err := tg.Sync(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGPUPeerDies: rank 1 exits before an all-gather; rank 0's kernel must
// not spin forever. Its watchdog (the group timeout, 3 s here) traps, and
// the stream reports an error within a few seconds instead of hanging.
func TestGPUPeerDies(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		const timeout = 3 * time.Second
		// No Close: rank 0's context is poisoned on purpose, rank 1 leaves.
		tg, err := NewTarget(context.Background(), env, TargetOptions{Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		if tg.G.kargs == nil {
			t.Skipf("no kernel path: %s", tg.G.kernWhy)
		}
		n, me := int64(tg.Size()), tg.Rank()
		out, err := tg.Alloc(1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.Barrier(); err != nil {
			t.Fatal(err)
		}
		if me == 1 {
			os.Exit(0) // dies between collectives, as a crashed rank would
		}
		time.Sleep(300 * time.Millisecond)
		slice := (1 << 20) / n
		in := coll.Span{Ptr: out.Ptr + uint64(int64(me)*slice), Len: slice}
		req := tg.Request(tg.G, tg.gid, coll.AllGather, out, in, slice/2, coll.BFloat16, coll.Sum, 0, coll.AlgoKernel)
		if _, err := tg.G.Run(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		var qerr error
		for time.Since(t0) < 30*time.Second {
			if qerr = tg.B.stream.Query(); qerr == nil || !errors.Is(qerr, cuda.ErrNotReady) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		el := time.Since(t0)
		logf(env, "PEER DIES: rank 1 exited; rank 0's stream after %v: %v\n", el.Round(time.Millisecond), qerr)
		switch {
		case qerr == nil:
			t.Fatal("the all-gather completed without its peer")
		case errors.Is(qerr, cuda.ErrNotReady):
			t.Fatalf("still running after %v: the watchdog did not fire", el)
		case el < timeout-500*time.Millisecond:
			t.Fatalf("failed after %v, before the %v watchdog", el, timeout)
		}
	})
}

// arData is count random finite values of dt from seed (any sum of a few
// of them stays finite).
func arData(dt coll.DType, count int64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	b := make([]byte, count*int64(dt.Size()))
	for i := int64(0); i < count; i++ {
		v := float32(rng.Float64()*200 - 100)
		switch dt {
		case coll.Float32:
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v*10))
		case coll.BFloat16:
			binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToBF16(v))
		case coll.Float16:
			binary.LittleEndian.PutUint16(b[2*i:], reduce.F32ToF16(v))
		}
	}
	return b
}

// TestGPUAllReduceKernel: the all-reduce kernel against reduce.ReduceN (the
// same float32 sums in rank order, one rounding): bit-exact, fresh random
// data, 16 B..2 MiB, float32/bfloat16/float16, in-place and out-of-place;
// then one call captured into a graph and replayed with new data.
func TestGPUAllReduceKernel(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		if tg.G.kargs == nil {
			t.Skipf("no kernel path: %s", tg.G.kernWhy)
		}
		n, me := tg.Size(), tg.Rank()
		const maxBytes = 2 << 20
		out, err := tg.Alloc(maxBytes+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tg.Alloc(maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		run := func(dt coll.DType, bytes int64, inPlace bool, graph bool) int {
			count := bytes / int64(dt.Size())
			sd := seeds(t, tg)
			inputs := make([][]byte, n)
			for r := range inputs {
				inputs[r] = arData(dt, count, sd[r])
			}
			want := make([]byte, bytes)
			if err := reduce.ReduceN(want, inputs, dt, coll.Sum); err != nil {
				t.Fatal(err)
			}
			src := coll.Span{Ptr: in.Ptr, Len: bytes}
			if inPlace {
				src = coll.Span{Ptr: out.Ptr, Len: bytes}
			}
			if err := cuda.Memset8(tg.B.ctx, out.Ptr, 0xAB, bytes+4096); err != nil {
				t.Fatal(err)
			}
			if err := tg.Write(src, inputs[me]); err != nil {
				t.Fatal(err)
			}
			if err := tg.Barrier(); err != nil {
				t.Fatal(err)
			}
			req := tg.Request(tg.G, tg.gid, coll.AllReduce, coll.Span{Ptr: out.Ptr, Len: bytes}, src, count, dt, coll.Sum, 0, coll.AlgoKernel)
			if graph {
				s := tg.B.stream
				if err := cuda.BeginCapture(tg.B.ctx, s); err != nil {
					t.Fatal(err)
				}
				_, rerr := tg.G.Run(context.Background(), req)
				gr, err := cuda.EndCapture(tg.B.ctx, s)
				if rerr != nil || err != nil {
					t.Fatalf("capture: %v, %v", rerr, err)
				}
				defer gr.Destroy()
				if err := gr.Launch(s); err != nil {
					t.Fatal(err)
				}
			} else if _, err := tg.G.Run(context.Background(), req); err != nil {
				t.Fatalf("%v %d bytes in-place=%v: %v", dt, bytes, inPlace, err)
			}
			if err := tg.Sync(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, bytes+4096)
			if err := tg.Read(got, coll.Span{Ptr: out.Ptr, Len: bytes + 4096}); err != nil {
				t.Fatal(err)
			}
			wrong := 0
			for i := range want {
				if got[i] != want[i] {
					wrong++
				}
			}
			for _, b := range got[bytes:] {
				if b != 0xAB {
					wrong++ // wrote past the output
				}
			}
			all, err := tg.ExchangeFloat64([]float64{float64(wrong)})
			if err != nil {
				t.Fatal(err)
			}
			sum := 0
			for _, v := range all {
				sum += int(v[0])
			}
			return sum
		}
		cases, bad := 0, 0
		for _, dt := range []coll.DType{coll.Float32, coll.BFloat16, coll.Float16} {
			for _, bytes := range []int64{16, 4096, 64<<10 + 16, 1 << 20, 2 << 20} {
				for _, inPlace := range []bool{false, true} {
					cases++
					if w := run(dt, bytes, inPlace, false); w != 0 {
						bad++
						t.Errorf("all_reduce kernel %v %d bytes in-place=%v: %d wrong bytes", dt, bytes, inPlace, w)
					}
				}
			}
		}
		for round := 0; round < 3; round++ { // a graph per round, each replayed once with fresh data
			cases++
			if w := run(coll.BFloat16, 1<<20, round%2 == 1, true); w != 0 {
				bad++
				t.Errorf("all_reduce kernel in a graph, round %d: %d wrong bytes", round, w)
			}
		}
		logf(env, "ALLREDUCE KERNEL: %d cases, %d wrong (bit-exact against reduce.ReduceN; 16 B..2 MiB, f32/bf16/f16, in/out-of-place, graph)\n", cases, bad)
	})
}
