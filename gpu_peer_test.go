package symmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// A peer that exits, on one host and across hosts (TestGPUWorldPeerDies),
// and kernel calls whose arguments differ (TestGPUWorldKernelMismatch).

// roleGPUPeerDies: rank 1 exits before an all-gather; the other ranks'
// kernels must not spin until the watchdog (3 s here): the call gate's
// watcher sees the exit and abandons the call, the kernels read the
// gate's failed word and stop waiting, so Synchronize fails within 1 s on
// every other rank, naming rank 1; no trap, so the context still works
// (a write and read back), while the group refuses further calls.
func roleGPUPeerDies(ctx context.Context) error {
	const watchdog = 3 * time.Second
	w, err := gpuWorld(ctx, Options{GPU: GPUOptions{Watchdog: watchdog}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	g := w.World()
	if !w.Supports(coll.AllGather, coll.AlgoKernel) {
		return fmt.Errorf("the cuda backend does not declare the kernel path")
	}
	bufs, err := gpuAlloc(ctx, g, 1<<20)
	if err != nil {
		return err
	}
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	slice := int64(1<<20) / int64(g.Size()) &^ 15 // the kernel's 16-byte vectors, with 3 ranks too
	in := coll.Span{Ptr: bufs[0].Ptr + uint64(int64(g.Rank())*slice), Len: slice}
	out := coll.Span{Ptr: bufs[0].Ptr, Len: slice * int64(g.Size())}
	if envInt("SYMMEM_TEST_HOSTS", 0) > 1 {
		return peerDiesAcrossHosts(ctx, w, g, out, in)
	}
	if g.Rank() == 1 {
		os.Exit(0) // dies between collectives, as a crashed rank would
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := g.AllGather(ctx, out, in, coll.BFloat16, WithAlgo(coll.AlgoKernel)); err != nil {
		if errors.Is(err, ErrRefused) {
			fmt.Println("SKIP: the kernel refused this geometry:", err)
			return nil
		}
		return err
	}
	t0 := time.Now()
	serr := w.Synchronize(ctx)
	el := time.Since(t0)
	fmt.Printf("GPU peer dies: rank 1 exited; rank %d's Synchronize after %v: %v\n", g.Rank(), el.Round(time.Millisecond), serr)
	switch {
	case serr == nil:
		return fmt.Errorf("the all-gather completed without its peer")
	case el >= watchdog-500*time.Millisecond:
		return fmt.Errorf("failed after %v, at the %v watchdog: the gate's watcher did not stop the kernel waiting for the exited rank", el, watchdog)
	case el >= time.Second:
		return fmt.Errorf("failed after %v, want < 1 s", el)
	case !errors.Is(serr, ErrPeerExited) || !strings.Contains(serr.Error(), "rank 1 exited"):
		return fmt.Errorf("the error does not say rank 1 exited (ErrPeerExited): %v", serr)
	case !strings.Contains(serr.Error(), "context is intact"):
		return fmt.Errorf("the error does not say the kernel ended with the context intact: %v", serr)
	}
	// The kernel stopped waiting instead of trapping: this process's
	// context still works (a write and a read through it).
	probe := bytes.Repeat([]byte{0x5A}, 4096)
	if err := w.Write(ctx, coll.Span{Ptr: bufs[0].Ptr, Len: int64(len(probe))}, probe); err != nil {
		return fmt.Errorf("the context does not work after the peer's exit: %w", err)
	}
	back := make([]byte, len(probe))
	if err := w.Read(ctx, back, coll.Span{Ptr: bufs[0].Ptr, Len: int64(len(back))}); err != nil || !bytes.Equal(back, probe) {
		return fmt.Errorf("the context does not read back after the peer's exit: %v", err)
	}
	if _, err := g.AllGather(ctx, out, in, coll.BFloat16, WithAlgo(coll.AlgoKernel)); err == nil {
		return fmt.Errorf("a call on the group after the peer's exit succeeded")
	}
	return nil
}

// peerDiesAcrossHosts is roleGPUPeerDies on a world that spans hosts
// (SYMMEM_TEST_HOSTS): symmem's kernels do not run there, NCCL does. The
// other ranks queue an all-gather (auto: NCCL) while rank 1 lives; rank 1
// exits 300 ms later without making it. Its presence in the store ends
// (and, on its host, its pidfd: the host gate), every other rank's group
// aborts its NCCL communicators, and Synchronize fails within 1 s of the
// exit naming rank 1 (not at the watchdog or never); host-side waits (a
// barrier beside Synchronize, one after it) fail too.
func peerDiesAcrossHosts(ctx context.Context, w *World, g *Group, out, in coll.Span) error {
	const exitAfter = 300 * time.Millisecond
	if g.Rank() == 1 {
		time.Sleep(exitAfter)
		fmt.Printf("rank 1 exits (unix ms %d)\n", time.Now().UnixMilli())
		os.Exit(0) // never makes the all-gather, as a crashed rank would
	}
	t0 := time.Now()
	path, err := g.AllGather(ctx, out, in, coll.BFloat16)
	if err != nil {
		return fmt.Errorf("queueing the all-gather while rank 1 lives: %w", err)
	}
	// Said before the wait, so a hang shows where it stopped (the harness
	// prints what a killed rank wrote).
	fmt.Printf("rank %d queued the all-gather via %s in %v (unix ms %d)\n", g.Rank(), path.Algo, time.Since(t0).Round(time.Millisecond), time.Now().UnixMilli())
	// A host-side wait beside the GPU one: it ends when the store says rank
	// 1 is gone, so the two times tell the exit's detection from the NCCL
	// kernels' end after the abort.
	probe := make(chan time.Duration, 1)
	var perr error
	go func() {
		perr = g.Barrier(ctx)
		probe <- time.Since(t0)
	}()
	serr := w.Synchronize(ctx)
	el := time.Since(t0)
	pel := <-probe
	berr := g.Barrier(ctx)
	fmt.Printf("GPU peer dies across hosts: rank 1 exited after %v; rank %d's Synchronize after %v: %v; host-side wait beside it after %v: %v; barrier after: %v\n",
		exitAfter, g.Rank(), el.Round(time.Millisecond), serr, pel.Round(time.Millisecond), perr, berr)
	switch {
	case serr == nil:
		return fmt.Errorf("the all-gather completed without rank 1")
	case el >= exitAfter+time.Second:
		return fmt.Errorf("Synchronize failed %v after rank 1's exit, want < 1 s: %w", el-exitAfter, serr)
	case !errors.Is(serr, ErrPeerExited) || !strings.Contains(serr.Error(), "rank 1 "):
		// Its host's members may learn it from their host gate (the pidfd,
		// "rank 1 exited before it made collective N") before the store
		// says so ("rank 1 (host h) exited"); either names it.
		return fmt.Errorf("Synchronize's error does not name rank 1 (ErrPeerExited): %w", serr)
	case !errors.Is(perr, ErrPeerExited) || !errors.Is(berr, ErrPeerExited):
		return fmt.Errorf("host-side waits after rank 1's exit: %v, then %v; want ErrPeerExited", perr, berr)
	}
	return nil
}

// roleGPUKernelMismatch: ranks call a kernel-path collective with different
// arguments: another type of the same bytes (rank 0 float32, the others
// bfloat16: the same grid), or a quarter of the count (a smaller grid: rank
// 0's extra CTAs have no peer CTA to meet, and must not wait for one). The
// kernels compare the calls' digests in-band: nothing is written (the
// outputs keep their fill), Synchronize reports ErrMismatch on every rank
// naming the argument (dtype or count) with both values, and the group then
// runs a matching call correctly. For the all-gather,
// one-shot and two-shot kernels.
func roleGPUKernelMismatch(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n, me := int64(g.Size()), int64(g.Rank())
	const elems = 3 << 14 // float32 per rank (all-gather) or in total (all-reduce): two-shot chunks for 2 and 3 ranks
	bufs, err := gpuAlloc(ctx, g, 4*elems*n, 4*elems*n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	fill := bytes.Repeat([]byte{0xAB}, int(out.Len))
	// "path": the same arguments, rank 0 forcing two-shot (two launches)
	// and the others the one-shot kernel (one): the second launch of rank 0
	// ends uncounted, so the matching call after it pairs up right; or rank
	// 0 on ll, which the kernel ranks see in their launch header and ll in
	// the header the kernel ranks wrote. ll's calls are an eighth (its area
	// holds 122 KiB per rank on 4 ranks).
	for _, variant := range []string{"type", "count", "path"} {
		for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLL} {
			for _, kind := range []coll.Kind{coll.AllGather, coll.AllReduce} {
				if algo == coll.AlgoTwoShot && kind == coll.AllGather || variant == "path" && (algo == coll.AlgoTwoShot || kind != coll.AllGather) {
					continue
				}
				if variant == "path" {
					kind = coll.AllReduce
				}
				per := int64(elems)
				if algo == coll.AlgoLL {
					per /= 8
				}
				dt, bytes0, ralgo := coll.Float32, 4*per, algo
				other := coll.AlgoTwoShot // rank 0's path in the path variant
				switch {
				case variant == "path":
					if algo == coll.AlgoLL {
						other, ralgo = coll.AlgoLL, coll.AlgoKernel
					}
					if me == 0 {
						ralgo = other
					}
				case me == 0:
				case variant == "type":
					dt = coll.BFloat16 // the same bytes: twice the count, the same grid
				default:
					bytes0 /= 4 // a quarter of the count: a smaller grid (CTAs of rank 0 meet no peer CTA)
				}
				run := func(dt coll.DType, bytes int64, algo coll.Algo) error {
					o := coll.Span{Ptr: out.Ptr, Len: bytes}
					if kind == coll.AllGather {
						o.Len = bytes * n
						_, err := g.AllGather(ctx, o, coll.Span{Ptr: in.Ptr, Len: bytes}, dt, WithAlgo(algo))
						return err
					}
					_, err := g.AllReduce(ctx, o, coll.Span{Ptr: in.Ptr, Len: bytes}, dt, coll.Sum, WithAlgo(algo))
					return err
				}
				if err := w.Write(ctx, out.Span, fill); err != nil {
					return err
				}
				if err := w.Write(ctx, in.Span, arValues(coll.Float32, elems*n, uint64(me+1))); err != nil {
					return err
				}
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				// The call itself reports when its kernel ended before the
				// host looked (run 26, 3 ranks); else Synchronize does.
				serr := run(dt, bytes0, ralgo)
				if otherHost(serr) {
					fmt.Printf("SKIP: the group spans hosts, symmem's kernels do not run on it: %v\n", serr)
					return nil
				}
				if serr != nil && !errors.Is(serr, ErrMismatch) {
					return fmt.Errorf("%v %s mismatched %s: %w", kind, algo, variant, serr)
				}
				if serr == nil {
					serr = w.Synchronize(ctx)
				} else if err := w.Synchronize(ctx); err != nil {
					return fmt.Errorf("%v %s: Synchronize after the call reported the mismatch: %w", kind, algo, err)
				}
				if !errors.Is(serr, ErrMismatch) {
					return fmt.Errorf("%v %s: ranks passed another %s than rank 0: Synchronize returned %v, want ErrMismatch", kind, algo, variant, serr)
				}
				// Every rank's error names the argument with both values
				// (fault.go swaps the records of the differing pair).
				named := []string{"with dtype=float32", "with dtype=bfloat16"}
				switch variant {
				case "count":
					named = []string{fmt.Sprintf("with count=%d", per), fmt.Sprintf("with count=%d", per/4)}
				case "path":
					named = []string{"on " + string(other), "on kernel"}
				}
				for _, s := range named {
					if !strings.Contains(serr.Error(), s) {
						return fmt.Errorf("%v %s: the mismatch error does not name the argument (want %q in it): %v", kind, algo, s, serr)
					}
				}
				got := make([]byte, out.Len)
				if err := w.Read(ctx, got, out.Span); err != nil {
					return err
				}
				if !bytes.Equal(got, fill) {
					return fmt.Errorf("%v %s: the mismatched call wrote into the output", kind, algo)
				}
				fmt.Printf("GPU mismatch (%s) %v %-8s: reported, output untouched: %v\n", variant, kind, algo, serr)
				// The group goes on: a matching call runs and is right.
				if err := g.Barrier(ctx); err != nil {
					return err
				}
				if err := run(coll.Float32, 4*elems/2, algo); err != nil {
					return fmt.Errorf("%v %s after the mismatch: %w", kind, algo, err)
				}
				if err := w.Synchronize(ctx); err != nil {
					return fmt.Errorf("%v %s after the mismatch: %w", kind, algo, err)
				}
				if kind == coll.AllReduce {
					sd := make([][]byte, n)
					for r := range sd {
						sd[r] = arValues(coll.Float32, elems*n, uint64(r+1))[:4*elems/2]
					}
					want := make([]byte, 4*elems/2)
					if err := reduce.ReduceN(want, sd, coll.Float32, coll.Sum); err != nil {
						return err
					}
					got := make([]byte, len(want))
					if err := w.Read(ctx, got, coll.Span{Ptr: out.Ptr, Len: int64(len(want))}); err != nil {
						return err
					}
					if !bytes.Equal(got, want) {
						return fmt.Errorf("%v %s after the mismatch: wrong result", kind, algo)
					}
				}
			}
		}
	}
	return nil
}

// roleGPUHostsMismatch (a run of several hosts, SYMMEM_TEST_HOSTS; it
// skips otherwise): the second half of the ranks, another "host", passes
// half the count of an NCCL all-reduce. No gate or kernel sees across
// hosts; the group's call log finds the difference after the call was
// issued and aborts the group's communicators: every rank's Synchronize
// (or a later call) fails within 2 s with ErrMismatch naming the count,
// instead of hanging in NCCL.
func roleGPUHostsMismatch(ctx context.Context) error {
	if envInt("SYMMEM_TEST_HOSTS", 0) < 2 {
		fmt.Println("SKIP: not a run of several hosts (SYMMEM_TEST_HOSTS)")
		return nil
	}
	w, err := gpuWorld(ctx, Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	const bytes = 1 << 20
	bufs, err := gpuAlloc(ctx, g, bytes, bytes)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	call := func(n int64) error {
		_, err := g.AllReduce(ctx, coll.Span{Ptr: out.Ptr, Len: n}, coll.Span{Ptr: in.Ptr, Len: n}, coll.Float32, coll.Sum)
		if err == nil {
			err = w.Synchronize(ctx)
		}
		return err
	}
	if err := call(bytes); err != nil { // the same call everywhere: no difference
		return fmt.Errorf("a matching all-reduce: %w", err)
	}
	n := int64(bytes)
	if g.Rank() >= g.Size()/2 {
		n /= 2
	}
	t0 := time.Now()
	err = call(n)
	for err == nil && time.Since(t0) < 3*time.Second { // found after the call: a later one fails
		time.Sleep(10 * time.Millisecond)
		err = call(bytes)
	}
	el := time.Since(t0)
	fmt.Printf("GPU hosts mismatch: rank %d passed %d bytes; failed after %v: %v\n", g.Rank(), n, el.Round(time.Millisecond), err)
	switch {
	case !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "count="):
		return fmt.Errorf("the ranks' counts differ across hosts: got %v, want ErrMismatch naming the count", err)
	case el > 2*time.Second:
		return fmt.Errorf("the difference was reported after %v, want < 2 s", el)
	}
	return nil
}

// roleGPUHostsHierMix (several hosts): the first host's ranks force the
// hier path while the others take auto (NCCL). The first host's ranks
// then wait for the others to make hier's child groups, the others in
// NCCL for them: the call log's comparison must end both with
// ErrMismatch within 2 s on every rank, not the group's 30 s timeout.
func roleGPUHostsHierMix(ctx context.Context) error {
	hosts := envInt("SYMMEM_TEST_HOSTS", 0)
	if hosts < 2 {
		fmt.Println("SKIP: not a run of several hosts (SYMMEM_TEST_HOSTS)")
		return nil
	}
	w, err := gpuWorld(ctx, Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	if g.Size()%hosts != 0 || g.Size()/hosts < 2 {
		fmt.Printf("SKIP: hier needs 2 or more ranks on each of %d hosts, the world has %d\n", hosts, g.Size())
		return nil
	}
	const n = 1 << 20
	bufs, err := gpuAlloc(ctx, g, n, n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	var opts []CallOption
	if g.Rank() < g.Size()/hosts {
		opts = append(opts, WithAlgo(coll.AlgoHier))
	}
	t0 := time.Now()
	_, err = g.AllReduce(ctx, coll.Span{Ptr: out.Ptr, Len: n}, coll.Span{Ptr: in.Ptr, Len: n}, coll.Float32, coll.Sum, opts...)
	if err == nil {
		err = w.Synchronize(ctx)
	}
	el := time.Since(t0)
	fmt.Printf("GPU hosts hier mix: rank %d (hier forced: %t) failed after %v: %v\n", g.Rank(), len(opts) > 0, el.Round(time.Millisecond), err)
	switch {
	case !errors.Is(err, ErrMismatch):
		return fmt.Errorf("hier on one host, NCCL on the other: got %v, want ErrMismatch", err)
	case el > 2*time.Second:
		return fmt.Errorf("the difference was reported after %v, want < 2 s", el)
	}
	return nil
}
