package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/reduce"
	"github.com/symmem/symmem/rendezvous"
)

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
				slice := size / n / 16 * 16 // the kernel's 16-byte vectors, for n = 3 too
				count, total := slice/2, n*slice
				in := coll.Span{Ptr: out.Ptr + uint64(int64(me)*slice), Len: slice} // in-place
				req := tg.Request(tg.G, tg.gid, coll.AllGather, coll.Span{Ptr: out.Ptr, Len: total}, in, count, coll.BFloat16, coll.Sum, 0, algo)
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
				host, want := make([]byte, total), make([]byte, slice)
				check := func(round int) {
					if err := s.Wait(context.Background(), 30*time.Second); err != nil {
						t.Fatalf("%s round %d: %v", algo, round, err)
					}
					if err := tg.Read(host, coll.Span{Ptr: out.Ptr, Len: total}); err != nil {
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
						err = tg.G.fillAllGatherArgs(req)
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
						p.Launch(req.Stream, tg.B.kern.ag, tg.G.kargs, allGatherCTAs(slice, tg.G.tune.kernCTAs), kernThreads)
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
// not spin forever. Its watchdog (Options.Watchdog, 3 s here) traps, and the
// stream reports an error within a few seconds instead of hanging.
func TestGPUPeerDies(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		const timeout = 3 * time.Second
		// No Close: rank 0's context is poisoned on purpose, rank 1 leaves.
		tg, err := NewTarget(context.Background(), env, TargetOptions{Timeout: 30 * time.Second, Backend: Options{Watchdog: timeout}})
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

// TestGPUAllReduceKernel: the all-reduce kernel, and reduce-scatter on it,
// against reduce.ReduceN (the same float32 sums in rank order, one rounding):
// bit-exact, fresh random data, 16 B..2 MiB per rank, float32/bfloat16/
// float16, in-place and out-of-place; then calls captured into graphs and
// replayed with new data.
func TestGPUAllReduceKernel(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		if tg.G.kargs == nil {
			t.Skipf("no kernel path: %s", tg.G.kernWhy)
		}
		n, me := tg.Size(), tg.Rank()
		const maxBytes = 2 << 20
		out, err := tg.Alloc(int64(n)*maxBytes+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tg.Alloc(int64(n)*maxBytes, true)
		if err != nil {
			t.Fatal(err)
		}
		// run does one call of kind with bytes of output per rank.
		run := func(kind coll.Kind, dt coll.DType, bytes int64, inPlace bool, graph bool) int {
			count := bytes / int64(dt.Size())
			inBytes, chunk := bytes, int64(0)
			if kind == coll.ReduceScatter {
				inBytes, chunk = bytes*int64(n), bytes*int64(me)
			}
			sd := seeds(t, tg)
			inputs := make([][]byte, n)
			parts := make([][]byte, n)
			for r := range inputs {
				inputs[r] = arData(dt, inBytes/int64(dt.Size()), sd[r])
				parts[r] = inputs[r][chunk : chunk+bytes]
			}
			want := make([]byte, bytes)
			if err := reduce.ReduceN(want, parts, dt, coll.Sum); err != nil {
				t.Fatal(err)
			}
			src := coll.Span{Ptr: in.Ptr, Len: inBytes}
			dst := coll.Span{Ptr: out.Ptr, Len: bytes}
			if inPlace { // all-reduce: out == in; reduce-scatter: out is chunk me of in
				src = coll.Span{Ptr: out.Ptr, Len: inBytes}
				dst = coll.Span{Ptr: out.Ptr + uint64(chunk), Len: bytes}
			}
			if err := cuda.Memset8(tg.B.ctx, out.Ptr, 0xAB, int64(n)*maxBytes+4096); err != nil {
				t.Fatal(err)
			}
			if err := tg.Write(src, inputs[me]); err != nil {
				t.Fatal(err)
			}
			if err := tg.Barrier(); err != nil {
				t.Fatal(err)
			}
			req := tg.Request(tg.G, tg.gid, kind, dst, src, count, dt, coll.Sum, 0, coll.AlgoKernel)
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
				t.Fatalf("%v %v %d bytes in-place=%v: %v", kind, dt, bytes, inPlace, err)
			}
			if err := tg.Sync(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, bytes+4096)
			if err := tg.Read(got, coll.Span{Ptr: dst.Ptr, Len: bytes + 4096}); err != nil {
				t.Fatal(err)
			}
			wrong := 0
			for i := range want {
				if got[i] != want[i] {
					wrong++
				}
			}
			if !inPlace || kind == coll.AllReduce {
				for _, b := range got[bytes:] {
					if b != 0xAB {
						wrong++ // wrote past the output
					}
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
		for _, kind := range []coll.Kind{coll.AllReduce, coll.ReduceScatter} {
			for _, dt := range []coll.DType{coll.Float32, coll.BFloat16, coll.Float16} {
				for _, bytes := range []int64{16, 4096, 64<<10 + 16, 1 << 20, 2 << 20} {
					for _, inPlace := range []bool{false, true} {
						cases++
						if w := run(kind, dt, bytes, inPlace, false); w != 0 {
							bad++
							t.Errorf("%v kernel %v %d bytes in-place=%v: %d wrong bytes", kind, dt, bytes, inPlace, w)
						}
					}
				}
			}
			for round := 0; round < 3; round++ { // a graph per round, each replayed once with fresh data
				cases++
				if w := run(kind, coll.BFloat16, 1<<20, round%2 == 1, true); w != 0 {
					bad++
					t.Errorf("%v kernel in a graph, round %d: %d wrong bytes", kind, round, w)
				}
			}
		}
		logf(env, "ALLREDUCE KERNEL: %d cases, %d wrong (all_reduce and reduce_scatter, bit-exact against reduce.ReduceN; 16 B..2 MiB per rank, f32/bf16/f16, in/out-of-place, graph)\n", cases, bad)
	})
}
