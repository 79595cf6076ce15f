package symmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// All-to-all on the GPU through the user API: equal blocks and host split
// counts (random matrices with zeros, a rank that sends nothing, everything
// to one rank, nothing at all), symmetric and ordinary inputs, a symmetric
// and an ordinary output, auto and every algorithm the backend declares for
// all_to_all, fresh random data checked element by element.

func init() {
	roles["gpua2a"] = roleGPUAllToAll
	roleLimits["gpua2a"] = 120 * time.Second
}

func TestGPUWorldAllToAll(t *testing.T) { gpuSpawn(t, "gpua2a") }

// a2aShape is one all-to-all's counts: m[i][j] elements from rank i to
// rank j; equal blocks when equal.
type a2aShape struct {
	name  string
	m     [][]int64
	equal bool
}

// sends is what rank i sends, in elements; recvs what rank j receives.
func (s a2aShape) sends(i int) (t int64) {
	for _, c := range s.m[i] {
		t += c
	}
	return t
}

func (s a2aShape) recvs(j int) (t int64) {
	for i := range s.m {
		t += s.m[i][j]
	}
	return t
}

// a2aEqual is the equal form of count elements per block on n ranks.
func a2aEqual(n int, count int64) a2aShape {
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
		for j := range m[i] {
			m[i][j] = count
		}
	}
	return a2aShape{name: fmt.Sprintf("equal count=%d", count), m: m, equal: true}
}

// a2aShapes draws the split-count matrices of a run on n ranks, up to hi
// elements per block (every rank draws the same from rng).
func a2aShapes(rng *rand.Rand, n int, hi int64) []a2aShape {
	mat := func(f func(i, j int) int64) [][]int64 { return countMatrix(n, f) }
	random := func(top int64) func(i, j int) int64 {
		return func(int, int) int64 {
			if rng.IntN(4) == 0 {
				return 0
			}
			return rng.Int64N(top + 1)
		}
	}
	silent, sink := rng.IntN(n), rng.IntN(n)
	return []a2aShape{
		{name: "random small", m: mat(random(100))},
		{name: "random large", m: mat(random(hi))},
		{name: "random odd", m: mat(func(i, j int) int64 { return random(hi/4)(i, j) | 1 })},
		{name: fmt.Sprintf("rank %d sends nothing", silent), m: mat(func(i, j int) int64 {
			if i == silent {
				return 0
			}
			return rng.Int64N(hi/8 + 1)
		})},
		{name: fmt.Sprintf("everything to rank %d", sink), m: mat(func(i, j int) int64 {
			if j != sink {
				return 0
			}
			return 1 + rng.Int64N(hi/2)
		})},
		{name: "all zero", m: mat(func(int, int) int64 { return 0 })},
	}
}

// a2aOnce runs shape s once on g into out from in (capacities) with fresh
// data, and returns the path and the wrong elements summed over the
// members, counting bytes past the received blocks that changed (0 and the
// refusal as the path where the call was refused: every rank refuses
// alike).
func a2aOnce(ctx context.Context, w *World, g *Group, out, in coll.Span, s a2aShape, dt coll.DType, algo coll.Algo) (coll.Path, int64, error) {
	n, me := g.Size(), g.Rank()
	es := int64(dt.Size())
	sd, err := seedsOf(ctx, g)
	if err != nil {
		return coll.Path{}, 0, err
	}
	inputs := make([][]byte, n)
	for i := range inputs {
		inputs[i] = make([]byte, s.sends(i)*es)
		fillSeed(inputs[i], sd[i])
	}
	recv := s.recvs(me) * es
	guard := coll.Span{Ptr: out.Ptr, Len: min(recv+64, out.Len)}
	if err := w.Write(ctx, guard, bytes.Repeat([]byte{0xAB}, int(guard.Len))); err != nil {
		return coll.Path{}, 0, err
	}
	if len(inputs[me]) > 0 {
		if err := w.Write(ctx, coll.Span{Ptr: in.Ptr, Len: int64(len(inputs[me]))}, inputs[me]); err != nil {
			return coll.Path{}, 0, err
		}
	}
	if err := g.Barrier(ctx); err != nil { // every rank's input has landed
		return coll.Path{}, 0, err
	}
	var path coll.Path
	if s.equal {
		l := s.m[0][0] * es * int64(n)
		path, err = g.AllToAll(ctx, coll.Span{Ptr: out.Ptr, Len: l}, coll.Span{Ptr: in.Ptr, Len: l}, dt, WithAlgo(algo))
	} else {
		send, rcv := make([]int64, n), make([]int64, n)
		for j := range n {
			send[j], rcv[j] = s.m[me][j], s.m[j][me]
		}
		path, err = g.AllToAllV(ctx, out, in, send, rcv, dt, WithAlgo(algo))
	}
	if errors.Is(err, ErrRefused) {
		return coll.Path{Algo: algo, Reason: "refused: " + err.Error()}, 0, nil
	}
	if errors.Is(err, ErrNotSupported) { // e.g. NCCL with ranks sharing a GPU
		return coll.Path{Algo: algo, Reason: "unavailable: " + err.Error()}, 0, nil
	}
	if err != nil {
		return path, 0, err
	}
	got := make([]byte, guard.Len)
	if err := w.Read(ctx, got, guard); err != nil {
		return path, 0, err
	}
	var wrong int64
	at := int64(0)
	for i := range n {
		from := int64(0) // where rank i's block for this rank starts in its input
		for k := range me {
			from += s.m[i][k] * es
		}
		for e := int64(0); e < s.m[i][me]; e++ {
			if !bytes.Equal(got[at+e*es:][:es], inputs[i][from+e*es:][:es]) {
				if wrong == 0 {
					fmt.Printf("rank %d: %s %v element %d of the block from rank %d differs\n", me, s.name, dt, e, i)
				}
				wrong++
			}
		}
		at += s.m[i][me] * es
	}
	for _, b := range got[recv:] {
		if b != 0xAB {
			wrong++ // wrote past the received blocks
		}
	}
	sum, err := sumWrong(ctx, g, wrong)
	return path, sum, err
}

// roleGPUAllToAll: equal blocks (4 KiB..16 MiB per rank, odd counts,
// bf16/f32/int8) and split-count matrices, symmetric and ordinary input,
// symmetric and ordinary output, auto and every algorithm declared for
// all_to_all. auto is never refused on a symmetric output where the group
// is on one host (copy engines take it); device split counts are refused
// unless the kernel path serves all_to_all.
func roleGPUAllToAll(ctx context.Context) error {
	w, err := gpuWorld(ctx, Options{})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	n := g.Size()
	const capBytes = 16 << 20
	bufs, err := gpuAlloc(ctx, g, capBytes+4096, capBytes, int64(8*n), int64(16*n))
	if err != nil {
		return err
	}
	local, err := w.AllocLocal(capBytes)
	if err != nil {
		return err
	}
	defer w.Free(local)
	localOut, err := w.AllocLocal(capBytes + 4096)
	if err != nil {
		return err
	}
	defer w.Free(localOut)
	outSym, inSym := bufs[0].Span, bufs[1].Span
	algos := append([]coll.Algo{coll.AlgoAuto}, w.Algos(coll.AllToAll)...)
	shared, err := seedsOf(ctx, g)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(shared[0], 0xa2a))
	type form struct {
		s  a2aShape
		dt coll.DType
	}
	var forms []form
	for _, size := range []int64{4 << 10, 1 << 20, capBytes} {
		for _, dt := range []coll.DType{coll.BFloat16, coll.Float32, coll.Int8} {
			count := size/int64(dt.Size())/int64(n) - 1 | 1
			forms = append(forms, form{a2aEqual(n, count), dt})
		}
	}
	for i, s := range a2aShapes(rng, n, capBytes/4/int64(n)) {
		forms = append(forms, form{s, []coll.DType{coll.Float32, coll.BFloat16, coll.Int8}[i%3]})
	}
	oneHost := envInt("SYMMEM_TEST_HOSTS", 0) <= 1
	cases, bad, refused := 0, 0, 0
	ran, unavailable := map[coll.Algo]int{}, map[coll.Algo]string{}
	start := time.Now()
	for _, f := range forms {
		for _, io := range []struct {
			name    string
			out, in coll.Span
			sym     bool
		}{
			{"symmetric", outSym, inSym, true},
			{"ordinary input", outSym, local.Span, true},
			{"ordinary output", localOut.Span, inSym, false},
		} {
			for _, algo := range algos {
				path, wrong, err := a2aOnce(ctx, w, g, io.out, io.in, f.s, f.dt, algo)
				what := fmt.Sprintf("all_to_all %s %v %s %s", f.s.name, f.dt, io.name, algo)
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				cases++
				why, refusal := strings.CutPrefix(path.Reason, "refused: ")
				if !refusal {
					why, refusal = strings.CutPrefix(path.Reason, "unavailable: ")
					if refusal {
						unavailable[algo] = why
					}
				}
				switch {
				case refusal && algo == coll.AlgoAuto && io.sym && oneHost:
					return fmt.Errorf("%s: auto refused a symmetric output: %s", what, why)
				case refusal:
					refused++
				case algo != coll.AlgoAuto:
					ran[algo]++
				}
				if wrong != 0 {
					bad++
					fmt.Printf("WRONG %s (path %s): %d elements\n", what, path.Algo, wrong)
				}
			}
		}
	}
	fmt.Printf("GPU all_to_all: %d cases, %d wrong, %d refused, %.1fs (algos %v, ran %v)\n", cases, bad, refused, time.Since(start).Seconds(), algos, ran)
	for a, why := range unavailable {
		fmt.Printf("GPU all_to_all: %s unavailable here: %s\n", a, why)
	}
	if bad != 0 {
		return fmt.Errorf("%d of %d all-to-all cases wrong", bad, cases)
	}
	kernel := false
	for _, a := range algos {
		kernel = kernel || a == coll.AlgoKernel
	}
	if !kernel {
		_, err := g.AllToAllVDev(ctx, outSym, inSym, bufs[2].Span, bufs[3].Span, coll.Float32)
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "kernel path") {
			return fmt.Errorf("all_to_all with device split counts and no kernel path: %v, want ErrNotSupported naming the kernel path", err)
		}
	}
	return nil
}

// countMatrix is the n x n count matrix m[i][j] = f(i, j): what rank i
// sends rank j.
func countMatrix(n int, f func(i, j int) int64) [][]int64 {
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
		for j := range m[i] {
			m[i][j] = f(i, j)
		}
	}
	return m
}
