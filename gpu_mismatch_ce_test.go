package symmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// Differences on the copy-engine and NCCL paths, which cannot compare in
// band: the call gate (internal/backend/cuda/gate.go, always on for ranks
// on one host) and, in checked mode, the handshake beside the call too.
//
//   - paths: the ranks pass the same arguments but rank 0 forces symmem's
//     kernel while the others force the path under test (ce, lc, nccl);
//     with and without checked mode;
//   - count: every rank on the path, the last rank passes another count;
//   - skip: the last rank does not make the call at all (the gate's
//     watchdog, Options.GPU.Watchdog = 3 s, stops the others);
//   - exit: the last rank's process exits instead of making the call (the
//     others' watchers see it through its pidfd and stop them at once).
//
// Every rank reports ErrMismatch naming the difference (or, for skip, a
// timeout naming the rank) within seconds: from the call itself (the rank
// that found it, nothing queued) or from Synchronize (a rank whose queued
// wait was stopped: its context is lost). Each case runs in fresh
// processes (the stops end their contexts; under MPS one client's trap
// ends every client's); nccl skips where NCCL is unavailable (ranks sharing
// a GPU).

func init() { roles["gpucemismatch"] = roleGPUCopyEngineMismatch }

func TestGPUCopyEngineMismatch(t *testing.T) {
	type tc struct {
		what    string
		algo    coll.Algo
		checked bool
	}
	var cases []tc
	for _, algo := range []coll.Algo{coll.AlgoCE, coll.AlgoLowContention, coll.AlgoNCCL} {
		cases = append(cases, tc{"paths", algo, false}, tc{"paths", algo, true}, tc{"count", algo, false})
	}
	cases = append(cases, tc{"skip", coll.AlgoCE, false}, tc{"exit", coll.AlgoCE, false})
	for _, c := range cases {
		name := fmt.Sprintf("%s/%s", c.what, c.algo)
		if c.checked {
			name += "/checked"
		}
		t.Run(name, func(t *testing.T) {
			n, env := gpuRanks(t)
			res := spawn(t, n, "gpucemismatch", append(env, "SYMMEM_TEST_CE_ALGO="+string(c.algo), "SYMMEM_TEST_CE_WHAT="+c.what,
				fmt.Sprintf("SYMMEM_TEST_CE_CHECKED=%t", c.checked))...)
			for r, rr := range res {
				t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
			}
			expectOK(t, res)
		})
	}
}

func roleGPUCopyEngineMismatch(ctx context.Context) error {
	algo := coll.Algo(os.Getenv("SYMMEM_TEST_CE_ALGO"))
	what := os.Getenv("SYMMEM_TEST_CE_WHAT")
	checked := os.Getenv("SYMMEM_TEST_CE_CHECKED") == "true"
	w, err := gpuWorld(ctx, Options{Checked: checked, GPU: GPUOptions{Watchdog: 3 * time.Second}})
	if err != nil {
		return err
	}
	defer func() { // Close is bounded; how long it takes after a stop is part of the story
		t0 := time.Now()
		err := w.Close()
		fmt.Printf("GPU %s %s: Close took %v: %v\n", what, algo, time.Since(t0).Round(time.Millisecond), err)
	}()
	g := w.World()
	n, me := int64(g.Size()), int64(g.Rank())
	last := me == n-1
	const slice = 1 << 20 // bytes per rank
	bufs, err := gpuAlloc(ctx, g, slice*n, slice*n)
	if err != nil {
		return err
	}
	out, in := bufs[0], bufs[1]
	rs := algo == coll.AlgoLowContention // lc serves reduce-scatter; the others all-gather
	call := func(algo coll.Algo, count int64) (coll.Path, error) {
		if rs {
			return g.ReduceScatter(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count}, coll.Span{Ptr: in.Ptr, Len: 4 * count * n}, coll.Float32, coll.Sum, WithAlgo(algo))
		}
		return g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: 4 * count * n}, coll.Span{Ptr: in.Ptr, Len: 4 * count}, coll.Float32, WithAlgo(algo))
	}
	count := int64(slice / 4)
	// Matching calls first: the gate approves them (and lc's staging exists).
	for range 3 {
		if p, err := call(algo, count); algo == coll.AlgoNCCL && errors.Is(err, ErrNotSupported) {
			fmt.Printf("GPU %s nccl: skipped, NCCL unavailable: %v\n", what, err)
			return nil
		} else if err != nil || p.Algo != algo {
			return fmt.Errorf("matching %s call: path %v, %w", algo, p, err)
		}
	}
	if err := w.Synchronize(ctx); err != nil {
		return fmt.Errorf("matching %s calls: %w", algo, err)
	}
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	mine, myCount, want := algo, count, []string{fmt.Sprintf("on %s", algo), "on kernel"}
	switch what {
	case "paths":
		if me == 0 {
			mine = coll.AlgoKernel
		}
	case "count":
		if last {
			myCount = count / 2
		}
		want = []string{fmt.Sprintf("count=%d", count/2), fmt.Sprintf("count=%d", count)}
	case "exit":
		want = []string{fmt.Sprintf("rank %d exited before it made collective", n-1)}
		if last {
			fmt.Printf("GPU exit: rank %d exits instead of making the call\n", me)
			os.Exit(0)
		}
	case "skip":
		want = []string{fmt.Sprintf("rank %d did not make it", n-1), "watchdog"}
		if last {
			time.Sleep(6 * time.Second) // the others' watchdog (3 s) stops them meanwhile
			fmt.Printf("GPU skip: rank %d made no call\n", me)
			return nil
		}
	}
	start := time.Now()
	// The rank that finds the difference gets it from the call (nothing
	// was queued); the others from Synchronize (their wait was stopped).
	_, cerr := call(mine, myCount)
	if cerr != nil && !errors.Is(cerr, ErrMismatch) {
		return fmt.Errorf("%s call (%s): %w", mine, what, cerr)
	}
	serr := w.Synchronize(ctx)
	took := time.Since(start)
	got := cerr
	if got == nil {
		got = serr
	}
	ok := got != nil && took < 5*time.Second
	for _, s := range want {
		ok = ok && strings.Contains(got.Error(), s)
	}
	switch what {
	case "skip":
	case "exit":
		ok = ok && errors.Is(got, ErrPeerExited)
	default:
		ok = ok && errors.Is(got, ErrMismatch)
	}
	if !ok {
		err := fmt.Errorf("%s %s: the call returned %v, Synchronize %v after %v; want an error naming %q within seconds", what, mine, cerr, serr, took, want)
		fmt.Printf("GPU %s %s: %v\n", what, algo, err) // now: a Close that hangs after it would hide it
		return err
	}
	fmt.Printf("GPU %s %-4s rank on %-6s: reported after %v (call: %v)\n  %v\n", what, algo, mine, took.Round(time.Millisecond), cerr != nil, got)
	if what == "exit" { // Close does not wait for the rank that left (its pidfd says so)
		t0 := time.Now()
		cerr := w.Close()
		if took := time.Since(t0); took > 5*time.Second {
			return fmt.Errorf("exit: Close took %v after the exit was known: %v", took, cerr)
		}
		return nil
	}
	// The group stays unusable: a later call is refused at once. (Not in
	// checked mode: its store exchange of a call only this rank makes
	// would pair with a peer's Close and stall it until the timeout.)
	if !checked {
		if _, err := call(algo, count); err == nil {
			return fmt.Errorf("%s: a call after the difference succeeded", what)
		}
	}
	return nil
}
