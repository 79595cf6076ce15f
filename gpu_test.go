package symmem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// The user API on GPUs: Init with the cuda backend, the world plus TP x DP
// subgroups (with 4 GPUs) sharing one pool, every op on symmetric buffers
// through auto and each forced algorithm, and ordinary device memory through
// plain NCCL. Fresh random data every case, checked on the host. Skips where
// there is no usable GPU (CI); on the GPU host run it directly (it starts one
// rank per GPU, at most 4) or as ranks of `symmem launch`.

func init() {
	roles["gpu"] = roleGPU
	roles["gpucost"] = roleGPUCost
}

// gpuRanks is the rank count of a GPU test — one per GPU up to 4, at least
// 2, or SYMMEM_GPU_TEST_RANKS — and the environment the ranks need: more
// ranks than GPUs share them (SYMMEM_SHARE_DEVICE=1; NCCL is off then).
func gpuRanks(t *testing.T) (int, []string) {
	gpus, err := cudadrv.DeviceCount()
	if err != nil || gpus < 1 {
		t.Skipf("GPU test skipped: no usable GPU (device count %d, %v)", gpus, err)
	}
	n := max(2, min(gpus, 4))
	if v, err := strconv.Atoi(os.Getenv("SYMMEM_GPU_TEST_RANKS")); err == nil && v >= 1 {
		n = v
	}
	env := []string{"NCCL_NVLS_ENABLE=0"}
	// As H hosts (SYMMEM_TEST_HOSTS) each host's ranks get the GPUs
	// (launch.RankEnv): they share them only when a host has more ranks.
	if per := n / max(1, envInt("SYMMEM_TEST_HOSTS", 1)); per > gpus {
		env = append(env, rendezvous.VarShareDevice+"=1")
		t.Logf("%d ranks share %d GPU(s)", n, gpus)
	}
	return n, env
}

func TestGPUUserAPI(t *testing.T) {
	n, env := gpuRanks(t)
	res := spawn(t, n, "gpu", env...)
	for r, rr := range res {
		t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
	}
	expectOK(t, res)
}

// gpuCase is one collective checked on one group.
type gpuCase struct {
	kind  coll.Kind
	dt    coll.DType
	algo  coll.Algo
	count int64 // elements per rank (AG input, RS output, AR both)
	plain bool  // ordinary device memory outside the pool
	inPl  bool  // in-place (AG: input is my slice of the output; AR: in == out)
}

func roleGPU(ctx context.Context) error {
	w, err := Init(ctx, Options{Backend: "cuda", Timeout: 40 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	n, me := w.Size(), w.Rank()
	groups := []*Group{w.World()}
	if n == 4 { // TP=2 x DP=2: tp{0,1} tp{2,3}, dp{0,2} dp{1,3}
		for _, spec := range []struct {
			name  string
			ranks []int
		}{{"tp0", []int{0, 1}}, {"tp1", []int{2, 3}}, {"dp0", []int{0, 2}}, {"dp1", []int{1, 3}}} {
			g, err := w.NewGroup(ctx, spec.name, spec.ranks)
			if err != nil {
				return err
			}
			groups = append(groups, g)
		}
	}
	var cases []gpuCase
	for _, c := range []int64{1001, 1 << 19, 4<<20 + 3} {
		cases = append(cases,
			gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoAuto, count: c},
			gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoCE, count: c},
			gpuCase{kind: coll.AllGather, dt: coll.Int8, algo: coll.AlgoCE, count: c, inPl: true},
			gpuCase{kind: coll.AllGather, dt: coll.Float32, algo: coll.AlgoNCCLWindow, count: c},
			gpuCase{kind: coll.ReduceScatter, dt: coll.Float32, algo: coll.AlgoAuto, count: c},
			gpuCase{kind: coll.ReduceScatter, dt: coll.Float32, algo: coll.AlgoNCCLWindow, count: c},
			gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoAuto, count: c},
			gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoNCCLWindow, count: c, inPl: true},
			gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoAuto, count: c, plain: true},
			gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoAuto, count: c, plain: true},
		)
	}
	cases = append(cases, // the kernel moves 16-byte vectors: slices of 1 MiB
		gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoKernel, count: 1 << 19},
		gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoKernel, count: 1 << 19, inPl: true},
		gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoKernel, count: 1 << 18},
		gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoKernel, count: 1 << 18, inPl: true},
		gpuCase{kind: coll.AllReduce, dt: coll.Float32, algo: coll.AlgoAuto, count: 1 << 14})
	shared := w.env.ShareDevice && gpusVisible() < w.env.LocalWorldSize // ranks of this host share a GPU
	if shared {
		// Ranks share a GPU: NCCL is off. Forced NCCL must say so
		// (ErrNotSupported); ordinary memory runs only where ll takes it
		// (gpuNCCLRefused checks both outcomes). The NCCL and ordinary-memory
		// cases are dropped here.
		kept := cases[:0]
		for _, c := range cases {
			if c.plain || c.algo == coll.AlgoNCCLWindow || c.algo == coll.AlgoNCCL {
				continue
			}
			kept = append(kept, c)
		}
		cases = kept
		if err := gpuNCCLRefused(ctx, w); err != nil {
			return err
		}
	}
	seed := uint64(time.Now().UnixNano()) // fresh data each run; shared below
	all, err := w.World().AllGatherHost(ctx, binary.LittleEndian.AppendUint64(nil, seed))
	if err != nil {
		return err
	}
	seed = binary.LittleEndian.Uint64(all[0])
	var report []string
	for _, g := range groups {
		for i, c := range cases {
			path, err := gpuRun(ctx, w, g, c, seed+uint64(i)*1000003)
			if err != nil && shared && c.kind != coll.AllGather && !kernelServes(c) && errors.Is(err, ErrNotSupported) {
				// Without NCCL a reduction runs only on symmem's kernel.
				if g.IsMember() && me == g.Ranks()[0] {
					report = append(report, fmt.Sprintf("refused %-5s %-14v %-8v %-11s count=%-8d (shared GPU, no kernel path): ok",
						g.Name(), c.kind, c.dt, c.algo, c.count))
				}
				continue
			}
			if otherHost(err) { // a forced kernel or copy-engine path on a group that spans hosts
				if g.IsMember() && me == g.Ranks()[0] {
					report = append(report, fmt.Sprintf("refused %-5s %-14v %-8v %-11s count=%-8d (the group spans hosts): ok",
						g.Name(), c.kind, c.dt, c.algo, c.count))
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("group %s case %+v: %w", g.Name(), c, err)
			}
			if g.IsMember() && me == g.Ranks()[0] {
				report = append(report, fmt.Sprintf("ok %-5s %-14v %-8v %-11s count=%-8d inplace=%-5v plain=%-5v path=%v",
					g.Name(), c.kind, c.dt, c.algo, c.count, c.inPl, c.plain, path))
			}
		}
	}
	// A group closed and created again (its NCCL communicators, pads and
	// registrations go; the name is reused), twice.
	everyone := make([]int, n)
	for r := range everyone {
		everyone[r] = r
	}
	for round := 0; round < 2; round++ {
		g, err := w.NewGroup(ctx, "again", everyone)
		if err != nil {
			return fmt.Errorf("group close round %d: %w", round, err)
		}
		c := gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoAuto, count: 1 << 19}
		path, err := gpuRun(ctx, w, g, c, seed+uint64(round))
		if err != nil {
			return fmt.Errorf("group close round %d: %w", round, err)
		}
		if err := g.Close(ctx); err != nil {
			return fmt.Errorf("group close round %d: %w", round, err)
		}
		if _, err := g.OpenScope(); !errors.Is(err, ErrGroupClosed) {
			return fmt.Errorf("group close round %d: OpenScope after Close: %v", round, err)
		}
		report = append(report, fmt.Sprintf("ok group closed and recreated, round %d (all_gather path=%v)", round, path.Algo))
	}
	fmt.Println(strings.Join(report, "\n"))
	return nil
}

// kernelServes reports whether symmem's reduction kernel takes c: a sum of
// f32/bf16/f16 of at most 2 MiB per rank in 16-byte multiples.
func kernelServes(c gpuCase) bool {
	b := c.count * int64(c.dt.Size())
	return (c.dt == coll.Float32 || c.dt == coll.BFloat16 || c.dt == coll.Float16) && b%16 == 0 && b <= 2<<20
}

func gpusVisible() int {
	n, _ := cudadrv.DeviceCount()
	return n
}

// gpuNCCLRefused checks what a shared GPU (no NCCL) does with calls NCCL
// would take: a forced NCCL call fails with ErrNotSupported naming the
// shared GPU; ordinary device memory (outside the pool) runs only where a
// path of symmem's takes it, and must then be right.
//
// The rule, from internal/backend/cuda: of symmem's paths only ll serves
// buffers that are not registered pool blocks (it copies through its own
// area in the signal pad: lowlatency.go; kernel, two-shot, lc and ce need
// registered blocks). auto reaches ll for ordinary memory only where its
// table starts the call at ll (autotable.go: ll's turn; the other steps
// that hand a call to ll want symmetric buffers), and ll takes rows of
// 16-byte multiples up to its area, llCap (1 MiB per rank). So a small
// call auto starts at ll runs on ll; one it starts elsewhere, and one
// larger than ll's area, fail with ErrNotSupported naming the shared GPU
// (no path: NCCL unavailable); forced ll runs; a forced path that needs
// registered memory (kernel) refuses it (ErrRefused).
func gpuNCCLRefused(ctx context.Context, w *World) error {
	g := w.World()
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	buf, err := sc.Alloc(int64(4096 * g.Size()))
	if err != nil {
		return err
	}
	if err := sc.End(ctx); err != nil {
		return err
	}
	defer w.Free(buf)
	in := coll.Span{Ptr: buf.Ptr + uint64(4096*g.Rank()), Len: 4096}
	for _, a := range []coll.Algo{coll.AlgoNCCL, coll.AlgoNCCLWindow} {
		_, err := g.AllGather(ctx, buf.Span, in, coll.Int8, WithAlgo(a))
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "share GPU") {
			return fmt.Errorf("forced %s on a shared GPU: got %v, want ErrNotSupported naming the shared GPU", a, err)
		}
	}
	noPath := func(what string, err error) error {
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "share GPU") {
			return fmt.Errorf("%s on a shared GPU: got %v, want ErrNotSupported naming the shared GPU", what, err)
		}
		return nil
	}
	const llCap = 1 << 20 // bytes per rank ll's area holds (internal/backend/cuda: llCap)
	small := gpuCase{kind: coll.AllGather, dt: coll.BFloat16, algo: coll.AlgoAuto, count: 4096 / 2, plain: true}
	// Explain asks auto's own table (bfloat16, as small) where the call
	// starts; the data of a call that runs is checked against the host.
	explained := g.Explain(coll.AllGather, 4096*int64(g.Size()), false)
	path, err := gpuRun(ctx, w, g, small, 1)
	switch explained.Algo {
	case coll.AlgoLL:
		if err != nil || path.Algo != coll.AlgoLL {
			return fmt.Errorf("ordinary device memory on a shared GPU, 4 KiB per rank (auto explains: ll, %s): path %v, %v; want ll and the right data", explained.Reason, path, err)
		}
	case coll.AlgoAuto: // no path: Explain's reason is the refusal
		if err := noPath("ordinary device memory, 4 KiB per rank (auto explains: "+explained.Reason+")", err); err != nil {
			return err
		}
	default:
		return fmt.Errorf("ordinary device memory on a shared GPU: auto explains %v (%s), but only ll serves it without NCCL", explained.Algo, explained.Reason)
	}
	large := small
	large.count = 2 * llCap / 2 // 2 MiB per rank: past ll's area
	if _, err := gpuRun(ctx, w, g, large, 2); noPath("ordinary device memory past ll's area", err) != nil {
		return noPath("ordinary device memory past ll's area", err)
	}
	forcedLL := small
	forcedLL.algo = coll.AlgoLL
	switch path, err := gpuRun(ctx, w, g, forcedLL, 3); {
	case errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "kernels are unavailable"):
		// No kernels on this machine: ll cannot run anything.
	case err != nil || path.Algo != coll.AlgoLL:
		return fmt.Errorf("forced ll on ordinary device memory on a shared GPU: path %v, %v; want ll and the right data", path, err)
	}
	forcedKernel := small
	forcedKernel.algo = coll.AlgoKernel
	if _, err := gpuRun(ctx, w, g, forcedKernel, 4); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "pool block") {
		return fmt.Errorf("forced kernel on ordinary device memory: got %v, want ErrRefused (the kernel needs a registered pool block)", err)
	}
	return nil
}

// gpuRun runs c on g (every rank calls it: allocations stay symmetric) and
// checks the result against a host reference. Non-members only allocate.
func gpuRun(ctx context.Context, w *World, g *Group, c gpuCase, seed uint64) (coll.Path, error) {
	n, es := int64(len(g.Ranks())), int64(c.dt.Size())
	inLen, outLen := c.count*es, c.count*es
	switch c.kind {
	case coll.AllGather:
		outLen *= n
	case coll.ReduceScatter:
		inLen *= n
	}
	var in, out coll.Span
	if c.plain {
		if !g.IsMember() {
			return coll.Path{}, nil
		}
		ib, err := w.AllocLocal(inLen)
		if err != nil {
			return coll.Path{}, err
		}
		defer w.Free(ib)
		ob, err := w.AllocLocal(outLen)
		if err != nil {
			return coll.Path{}, err
		}
		defer w.Free(ob)
		in, out = ib.Span, ob.Span
	} else {
		sc, err := g.OpenScope()
		if err != nil {
			return coll.Path{}, err
		}
		ob, err := sc.Alloc(outLen)
		if err != nil {
			return coll.Path{}, err
		}
		ib := ob
		if !c.inPl {
			if ib, err = sc.Alloc(inLen); err != nil {
				return coll.Path{}, err
			}
		}
		if err := sc.End(ctx); err != nil {
			return coll.Path{}, err
		}
		defer w.Free(ob)
		if !c.inPl {
			defer w.Free(ib)
		}
		out, in = ob.Span, ib.Span
		if c.inPl && c.kind == coll.AllGather {
			in = coll.Span{Ptr: out.Ptr + uint64(int64(g.Rank())*inLen), Len: inLen}
		}
		if !g.IsMember() {
			return coll.Path{}, nil
		}
	}
	defer w.Synchronize(ctx) // nothing may still read the buffers when they are freed
	inputs := make([][]byte, n)
	for r := range inputs {
		inputs[r] = gpuData(c.dt, inLen, seed+uint64(r))
	}
	// World.Write returns once the bytes are visible to the peers: no rank
	// can start the collective on input that has not landed.
	if err := w.Write(ctx, in, inputs[g.Rank()]); err != nil {
		return coll.Path{}, err
	}
	if !c.inPl { // in-place: out holds (or is) the input
		if err := w.Write(ctx, out, bytes.Repeat([]byte{0xA5}, int(outLen))); err != nil {
			return coll.Path{}, err
		}
	}
	var path coll.Path
	var err error
	opt := WithAlgo(c.algo)
	switch c.kind {
	case coll.AllGather:
		path, err = g.AllGather(ctx, out, in, c.dt, opt)
	case coll.ReduceScatter:
		path, err = g.ReduceScatter(ctx, out, in, c.dt, coll.Sum, opt)
	case coll.AllReduce:
		path, err = g.AllReduce(ctx, out, in, c.dt, coll.Sum, opt)
	}
	if err != nil {
		return path, err
	}
	if err := w.Synchronize(ctx); err != nil {
		return path, err
	}
	got := make([]byte, outLen)
	if err := w.Read(ctx, got, out); err != nil {
		return path, err
	}
	if bad := gpuCheck(c, g.Rank(), inputs, got); bad != "" {
		return path, fmt.Errorf("wrong result on path %v: %s", path, bad)
	}
	return path, nil
}

// gpuData is seeded random data. Floats are small integers so sums are exact
// in any order; bf16 and int8 are raw random bytes (gathers only).
func gpuData(dt coll.DType, n int64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	if dt == coll.Float32 {
		for i := int64(0); i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(rng.IntN(2001)-1000)))
		}
		return b
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// gpuCheck compares got with the serial reference; "" when equal.
func gpuCheck(c gpuCase, me int, inputs [][]byte, got []byte) string {
	var want []byte
	switch c.kind {
	case coll.AllGather:
		for _, in := range inputs {
			want = append(want, in...)
		}
	default:
		sum := make([]float32, len(inputs[0])/4)
		for _, in := range inputs {
			for i := range sum {
				sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
			}
		}
		if c.kind == coll.ReduceScatter {
			per := len(sum) / len(inputs)
			sum = sum[me*per : (me+1)*per]
		}
		for _, v := range sum {
			want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
		}
	}
	wrong, first := 0, -1
	for i := range want {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			wrong++
		}
	}
	if wrong == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d bytes differ, first at byte %d (got %#x want %#x)", wrong, len(want), first, got[first], want[first])
}

// TestGPUUserHostCost measures the CPU time of one small all-gather issued
// through the user API (World group, pool buffers; the kernel forced, then
// auto), over bursts of 4
// calls right after a synchronisation (median of 200 bursts), so that the
// GPU's queue never blocks the caller.
func TestGPUUserHostCost(t *testing.T) {
	_, env := gpuRanks(t)
	res := spawn(t, 2, "gpucost", env...)
	for r, rr := range res {
		t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
	}
	expectOK(t, res)
}

func roleGPUCost(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	for _, size := range []int64{64 << 10, 1 << 20} {
		bufs, err := gpuAlloc(ctx, g, size)
		if err != nil {
			return err
		}
		out := bufs[0]
		slice := size / int64(w.Size())
		in := coll.Span{Ptr: out.Ptr + uint64(int64(g.Rank())*slice), Len: slice}
		// The kernel forced, so builds whose auto tables differ compare the
		// same work; then auto, whatever it takes.
		for _, algo := range []coll.Algo{coll.AlgoKernel, coll.AlgoAuto} {
			var path coll.Path
			per, err := hostBursts(ctx, w, g, func() (err error) {
				path, err = g.AllGather(ctx, out.Span, in, coll.BFloat16, WithAlgo(algo))
				return err
			})
			if algo == coll.AlgoKernel && errors.Is(err, ErrNotSupported) { // e.g. a group across hosts
				fmt.Printf("USERCOST all_gather %d bytes: the kernel refused this group: %v\n", size, err)
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", algo, err)
			}
			fmt.Printf("USERCOST all_gather %d bytes in-place via %s (%s): median %.2f us, p90 %.2f us per call (rank %d)\n",
				size, path.Algo, algo, per[len(per)/2], per[len(per)*9/10], w.Rank())
		}
		if err := w.Free(out); err != nil {
			return err
		}
	}
	return nil
}
