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
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/reduce"
)

// TestGPUStress is a randomized differential test of the GPU paths through
// the user API: random ops, dtypes, reductions, sizes (1 B .. 64 MiB, odd
// counts), all-to-all's split-count matrices, offsets inside the pool,
// in/out-of-place, every algorithm, two
// groups sharing the pool, calls captured into CUDA graphs and replayed
// between eager calls. Every result is compared with package reduce's serial
// reference on fresh random data; a call may instead be refused
// (ErrNotSupported / ErrRefused, alike on every rank) but never return wrong
// data, and an all-gather (or, on one host, an all-to-all) through auto is
// never refused. The case stream
// comes from one seed, printed first: SYMMEM_STRESS_SEED=<seed> replays it.
// SYMMEM_STRESS_SECONDS (default 240) bounds the run, SYMMEM_STRESS_CASES
// (default unlimited) the number of cases. Ranks: see gpuRanks.
func TestGPUStress(t *testing.T) {
	n, env := gpuRanks(t)
	res := spawn(t, n, "gpustress", env...)
	for r, rr := range res {
		t.Logf("rank %d (exit %d):\n%s", r, rr.code, rr.out)
	}
	expectOK(t, res)
}

func init() {
	roles["gpustress"] = roleGPUStress
	roleLimits["gpustress"] = time.Duration(envInt("SYMMEM_STRESS_SECONDS", 240)+90) * time.Second
}

// stressCase is one randomized call; every rank derives the same one.
type stressCase struct {
	group   int // index into the groups
	kind    coll.Kind
	dt      coll.DType
	op      coll.ReduceOp
	root    int
	count   int64 // backend.Request layout: AG per rank, RS output, AR/BC whole
	inPlace bool
	algo    coll.Algo
	pad     int64 // bytes allocated before the buffers (moves their pool offset)
	off     int64 // elements between the block's start and the span's
	graph   int   // 0: eager; k > 0: captured once, replayed k times between eager calls
	// splits is an all-to-all's split counts (splits[i][j]: elements group
	// rank i sends j; nil: equal blocks of count elements).
	splits [][]int64
}

func (c stressCase) String() string {
	s := fmt.Sprintf("g%d %v %v %v root=%d count=%d inplace=%v algo=%s pad=%d off=%d graph=%d",
		c.group, c.kind, c.dt, c.op, c.root, c.count, c.inPlace, c.algo, c.pad, c.off, c.graph)
	if c.splits != nil {
		s += fmt.Sprintf(" splits=%v", c.splits)
	}
	return s
}

var stressDTypes = []coll.DType{coll.Float32, coll.BFloat16, coll.Float16, coll.Float64, coll.Int32, coll.Int64, coll.Int8, coll.Uint8}

// newStressCase draws case i. Most cases come from what symmem's own GPU
// paths serve (all-gathers; sums of f32/bf16/f16 up to 2 MiB per rank), the
// rest from everything a caller may ask.
func newStressCase(rng *rand.Rand, groups []*Group) stressCase {
	c := stressCase{group: rng.IntN(len(groups)), op: coll.Sum, algo: coll.AlgoAuto}
	size := int64(len(groups[c.group].Ranks()))
	own := rng.IntN(10) < 7
	kinds := []coll.Kind{coll.AllGather, coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast, coll.AllToAll}
	c.kind = kinds[rng.IntN(len(kinds))]
	c.dt = stressDTypes[rng.IntN(len(stressDTypes))]
	if c.kind != coll.AllGather && c.kind != coll.Broadcast && c.kind != coll.AllToAll {
		c.op = coll.ReduceOp(rng.IntN(4)) + coll.Sum
	}
	if own && c.kind != coll.AllGather && c.kind != coll.AllToAll {
		c.kind = []coll.Kind{coll.ReduceScatter, coll.AllReduce}[rng.IntN(2)]
		c.dt = []coll.DType{coll.Float32, coll.BFloat16, coll.Float16}[rng.IntN(3)]
		c.op = coll.Sum
	}
	es := int64(c.dt.Size())
	// Total tensor bytes log-uniform in [1 B, 64 MiB] (2 MiB per rank for
	// the reductions symmem's kernel serves); odd counts half the time.
	maxLog := 26.0
	if own && c.kind != coll.AllGather {
		maxLog = 21
	}
	total := int64(math.Exp2(rng.Float64() * maxLog))
	per := max(1, total/es)
	switch c.kind {
	case coll.AllGather, coll.ReduceScatter:
		per = max(1, per/size)
	case coll.AllToAll:
		per = max(1, per/size/size)
	}
	if rng.IntN(2) == 0 {
		per |= 1
	} else {
		per = (per + 7) &^ 7 // 16-byte multiples for 2-byte types: the kernels' vector mode
	}
	c.count = per
	c.root = rng.IntN(int(size))
	c.inPlace = rng.IntN(3) == 0 && c.kind != coll.AllToAll // out of place only
	if c.kind == coll.AllToAll && rng.IntN(3) > 0 {
		c.splits = stressSplits(rng, int(size), per)
	}
	algos := []coll.Algo{coll.AlgoAuto, coll.AlgoAuto, coll.AlgoKernel, coll.AlgoCE, coll.AlgoNCCL, coll.AlgoNCCLWindow, coll.AlgoTwoShot, coll.AlgoLowContention, coll.AlgoLL, coll.AlgoHier}
	c.algo = algos[rng.IntN(len(algos))]
	c.pad = int64(rng.IntN(4)) * int64(rng.IntN(1<<20))
	if rng.IntN(2) == 0 {
		c.off = int64(rng.IntN(64))
	}
	if rng.IntN(5) == 0 {
		c.graph = 1 + rng.IntN(3)
	}
	return c
}

// stressSplits draws an all-to-all's split counts on n ranks, up to 2*per
// elements a block: random with zeros, a rank that sends nothing, or
// everything to one rank.
func stressSplits(rng *rand.Rand, n int, per int64) [][]int64 {
	shape, who := rng.IntN(3), rng.IntN(n)
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
		for j := range m[i] {
			switch {
			case shape == 1 && i == who, shape == 2 && j != who, rng.IntN(4) == 0:
			default:
				m[i][j] = rng.Int64N(2*per + 1)
			}
		}
	}
	return m
}

// lens are the bytes of a case's input and output tensors; with split
// counts, the largest any rank sends and receives (every rank allocates
// alike: the buffers are symmetric).
func (c stressCase) lens(n int64) (in, out int64) {
	one := c.count * int64(c.dt.Size())
	switch c.kind {
	case coll.AllGather:
		return one, one * n
	case coll.ReduceScatter:
		return one * n, one
	case coll.AllToAll:
		if c.splits == nil {
			return one * n, one * n
		}
		in, out = 1, 1 // a buffer of one element at least, where nothing moves
		for i := range c.splits {
			in, out = max(in, c.a2aSends(i)), max(out, c.a2aRecvs(i))
		}
		return in * int64(c.dt.Size()), out * int64(c.dt.Size())
	}
	return one, one
}

// a2aSends and a2aRecvs are the elements group rank r sends and receives
// in an all-to-all with split counts.
func (c stressCase) a2aSends(r int) (t int64) {
	for _, k := range c.splits[r] {
		t += k
	}
	return t
}

func (c stressCase) a2aRecvs(r int) (t int64) {
	for i := range c.splits {
		t += c.splits[i][r]
	}
	return t
}

// stressData is rank r's input for one round of a case: finite values
// (random floats in [-8, 8), random integers) so NaN payloads play no part.
func stressData(dt coll.DType, nbytes int64, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, nbytes)
	es := int64(dt.Size())
	for i := int64(0); i+es <= nbytes; i += es {
		f := rng.Float64()*16 - 8
		switch dt {
		case coll.Float32:
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(f)))
		case coll.Float64:
			binary.LittleEndian.PutUint64(b[i:], math.Float64bits(f))
		case coll.BFloat16:
			binary.LittleEndian.PutUint16(b[i:], reduce.F32ToBF16(float32(f)))
		case coll.Float16:
			binary.LittleEndian.PutUint16(b[i:], reduce.F32ToF16(float32(f)))
		default:
			for k := int64(0); k < es; k++ {
				b[i+k] = byte(rng.Uint32())
			}
		}
	}
	return b
}

// stressWant is the serial reference of the case on group rank me.
func stressWant(c stressCase, me int, inputs [][]byte) ([]byte, error) {
	switch c.kind {
	case coll.AllGather:
		return bytes.Join(inputs, nil), nil
	case coll.Broadcast:
		return inputs[c.root], nil
	case coll.AllToAll:
		return stressA2AWant(c, me, inputs), nil
	}
	full := make([]byte, len(inputs[0]))
	if err := reduce.ReduceN(full, inputs, c.dt, c.op); err != nil {
		return nil, err
	}
	if err := reduce.Finish(full, c.dt, c.op, len(inputs)); err != nil {
		return nil, err
	}
	if c.kind == coll.ReduceScatter {
		one := c.count * int64(c.dt.Size())
		return full[int64(me)*one : int64(me+1)*one], nil
	}
	return full, nil
}

// stressA2AWant is rank me's output of an all-to-all: the block each rank
// sends it, in rank order, then (split counts) the output's garbage
// (0xA5) up to its capacity.
func stressA2AWant(c stressCase, me int, inputs [][]byte) []byte {
	es := int64(c.dt.Size())
	n := len(inputs)
	var want []byte
	if c.splits == nil {
		one := c.count * es
		for i := range n {
			want = append(want, inputs[i][int64(me)*one:][:one]...)
		}
		return want
	}
	for i := range n {
		var from int64
		for k := range me {
			from += c.splits[i][k]
		}
		want = append(want, inputs[i][from*es:][:c.splits[i][me]*es]...)
	}
	_, capacity := c.lens(int64(n))
	return append(want, bytes.Repeat([]byte{0xA5}, int(capacity)-len(want))...)
}

// digits elides the numbers of a refusal's message (sizes, addresses).
var digits = regexp.MustCompile(`0x[0-9a-f]+|[0-9]+`)

// refused reports whether err is a clean refusal of the call.
func refused(err error) bool {
	return errors.Is(err, ErrNotSupported) || errors.Is(err, ErrRefused)
}

// Outcome codes exchanged after every case.
const (
	stressOK = iota
	stressRefused
	stressWrong
)

func roleGPUStress(ctx context.Context) error {
	w, err := Init(ctx, Options{Backend: "cuda", Timeout: 60 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	be := w.be.(*cuda.Backend)
	n, me := w.Size(), w.Rank()
	everyone := make([]int, n)
	for r := range everyone {
		everyone[r] = r
	}
	other := everyone
	if n >= 3 {
		other = []int{0, n - 1}
	}
	g2, err := w.NewGroup(ctx, "stress2", other)
	if err != nil {
		return err
	}
	groups := []*Group{w.World(), g2}
	stream, err := cudadrv.NewStream(be.Context(), 0)
	if err != nil {
		return err
	}
	defer stream.Destroy()

	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("SYMMEM_STRESS_SEED"), 10, 64); err == nil {
		seed = v
	}
	all, err := w.World().bg.AllGather(ctx, binary.LittleEndian.AppendUint64(nil, seed))
	if err != nil {
		return err
	}
	seed = binary.LittleEndian.Uint64(all[0])
	if me == 0 {
		fmt.Printf("STRESS seed %d (replay: SYMMEM_STRESS_SEED=%d), %d ranks, share device %v\n", seed, seed, n, w.env.ShareDevice)
	}
	budget := time.Duration(envInt("SYMMEM_STRESS_SECONDS", 240)) * time.Second
	maxCases := envInt("SYMMEM_STRESS_CASES", math.MaxInt)
	start := time.Now()
	rng := rand.New(rand.NewPCG(seed, 1))
	stats := map[string][3]int{} // "kind algo" -> ok, refused, wrong
	reasons := map[string]int{}  // "kind algo: why" (numbers elided) -> refused cases
	var checked, wrongCases int
	var firstWrong string
	for i := 0; i < maxCases; i++ {
		c := newStressCase(rng, groups)
		code, calls, why, err := stressRun(ctx, w, be, stream, groups[c.group], c, seed^uint64(i)*0x9e3779b97f4a7c15)
		if err != nil {
			return fmt.Errorf("case %d (%v): %w", i, c, err)
		}
		stop := byte(0)
		if me == 0 && time.Since(start) > budget {
			stop = 1
		}
		outs, err := w.World().bg.AllGather(ctx, []byte{byte(code), stop})
		if err != nil {
			return fmt.Errorf("case %d: exchanging outcomes: %w", i, err)
		}
		// Members refuse alike or not at all (a rank that refused while a
		// peer ran would leave that peer waiting).
		members := groups[c.group].Ranks()
		for _, r := range members {
			if outs[r][0] != outs[members[0]][0] {
				return fmt.Errorf("case %d (%v): ranks disagree on the outcome (rank %d: %d, rank %d: %d): %s",
					i, c, members[0], outs[members[0]][0], r, outs[r][0], why)
			}
		}
		key := fmt.Sprintf("%-14v %-11s", c.kind, c.algo)
		st := stats[key]
		st[code]++
		stats[key] = st
		checked += calls
		if code == stressRefused {
			reasons[key+": "+digits.ReplaceAllString(why, "#")]++
		}
		if code == stressWrong {
			wrongCases++
			if firstWrong == "" {
				firstWrong = fmt.Sprintf("case %d (%v): %s", i, c, why)
			}
		}
		if code == stressRefused && c.kind == coll.AllGather && c.algo == coll.AlgoAuto {
			return fmt.Errorf("case %d (%v): an all-gather through auto was refused: %s", i, c, why)
		}
		if code == stressRefused && c.kind == coll.AllToAll && c.algo == coll.AlgoAuto && envInt("SYMMEM_TEST_HOSTS", 0) <= 1 {
			return fmt.Errorf("case %d (%v): an all-to-all on symmetric buffers through auto was refused: %s", i, c, why)
		}
		if outs[0][1] == 1 {
			break
		}
	}
	if me == 0 {
		keys := make([]string, 0, len(stats))
		for k := range stats {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("STRESS %s ok %5d refused %5d wrong %d\n", k, stats[k][0], stats[k][1], stats[k][2])
		}
		// Why calls were refused, so a run shows that no path refuses a
		// shape it should take (e.g. an odd count on symmem's kernels).
		keys = keys[:0]
		for k := range reasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("STRESS refused %4d x %.200s\n", reasons[k], k)
		}
		cases := 0
		for _, v := range stats {
			cases += v[0] + v[1] + v[2]
		}
		fmt.Printf("STRESS total: %d cases, %d results checked, %d wrong, %.0f s, seed %d\n", cases, checked, wrongCases, time.Since(start).Seconds(), seed)
	}
	if wrongCases > 0 {
		return fmt.Errorf("%d cases gave wrong data; first: %s", wrongCases, firstWrong)
	}
	return nil
}

// stressRun allocates the case's buffers (every rank, so allocations stay
// symmetric), runs it on members — eagerly, or captured once and replayed
// with eager calls between replays — and checks every result. It returns the
// outcome code, the number of results checked and a description.
func stressRun(ctx context.Context, w *World, be *cuda.Backend, s *cudadrv.Stream, g *Group, c stressCase, seed uint64) (int, int, string, error) {
	n := int64(len(g.Ranks()))
	es := int64(c.dt.Size())
	inLen, outLen := c.lens(n)
	sc, err := g.OpenScope()
	if err != nil {
		return 0, 0, "", err
	}
	var bufs []Buffer
	defer func() {
		for _, b := range bufs {
			w.Free(b)
		}
	}()
	alloc := func(l int64) (Buffer, error) {
		b, err := sc.Alloc(l)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	if c.pad > 0 {
		if _, err := alloc(c.pad); err != nil {
			return 0, 0, "", err
		}
	}
	offB := c.off * es
	span := func(l int64) (coll.Span, error) {
		b, err := alloc(l + offB)
		return coll.Span{Ptr: b.Ptr + uint64(offB), Len: l}, err
	}
	chunk := func(s coll.Span, l int64) coll.Span {
		return coll.Span{Ptr: s.Ptr + uint64(int64(max(g.Rank(), 0))*l), Len: l}
	}
	var in, out coll.Span
	switch {
	case c.kind == coll.Broadcast, c.inPlace && c.kind == coll.AllReduce:
		out, err = span(outLen)
		in = out
	case c.inPlace && c.kind == coll.AllGather: // my input is my chunk of the output
		out, err = span(outLen)
		in = chunk(out, inLen)
	case c.inPlace && c.kind == coll.ReduceScatter: // my output is my chunk of the input
		in, err = span(inLen)
		out = chunk(in, outLen)
	default:
		if out, err = span(outLen); err == nil {
			in, err = span(inLen)
		}
	}
	if err != nil {
		return 0, 0, "", err
	}
	if err := sc.End(ctx); err != nil {
		return 0, 0, "", err
	}
	if !g.IsMember() {
		return stressOK, 0, "", nil
	}
	me := g.Rank()
	bctx := be.Context()
	call := func(stream uint64) (coll.Path, error) {
		opts := []CallOption{WithAlgo(c.algo)}
		if stream != 0 {
			opts = append(opts, WithStream(stream))
		}
		switch c.kind {
		case coll.AllGather:
			return g.AllGather(ctx, out, in, c.dt, opts...)
		case coll.ReduceScatter:
			return g.ReduceScatter(ctx, out, in, c.dt, c.op, opts...)
		case coll.AllReduce:
			return g.AllReduce(ctx, out, in, c.dt, c.op, opts...)
		case coll.AllToAll:
			if c.splits == nil {
				return g.AllToAll(ctx, out, in, c.dt, opts...)
			}
			send, recv := make([]int64, n), make([]int64, n)
			for j := range send {
				send[j], recv[j] = c.splits[me][j], c.splits[j][me]
			}
			return g.AllToAllV(ctx, out, in, send, recv, c.dt, opts...)
		}
		return g.Broadcast(ctx, out, c.root, c.dt, opts...)
	}
	// round writes fresh inputs (after every rank's previous round was read:
	// the barrier), runs do, waits and checks.
	round := func(k int, do func() (coll.Path, error), wait func() error) (int, string, error) {
		inputs := make([][]byte, n)
		for r := range inputs {
			inputs[r] = stressData(c.dt, inLen, seed+uint64(k)*7919+uint64(r))
		}
		// The output starts as garbage unless it holds the input.
		if !c.inPlace || c.kind == coll.AllGather || (c.kind == coll.Broadcast && me != c.root) {
			if err := cudadrv.Memset8(bctx, out.Ptr, 0xA5, outLen); err != nil {
				return 0, "", err
			}
		}
		if c.kind != coll.Broadcast || me == c.root {
			if err := cudadrv.CopyHtoD(bctx, in.Ptr, inputs[me]); err != nil { // complete on return
				return 0, "", err
			}
		}
		if _, err := g.bg.AllGather(ctx, []byte{1}); err != nil { // every rank's input is in place
			return 0, "", err
		}
		path, err := do()
		if err != nil {
			if refused(err) {
				return stressRefused, err.Error(), nil
			}
			return 0, "", err
		}
		if err := wait(); err != nil {
			return 0, "", fmt.Errorf("path %v: %w", path, err)
		}
		got := make([]byte, outLen)
		if err := cudadrv.CopyDtoH(bctx, got, out.Ptr); err != nil {
			return 0, "", err
		}
		want, err := stressWant(c, me, inputs)
		if err != nil {
			return 0, "", err
		}
		if i := stressCompare(c, n, path, got, want); i >= 0 {
			return stressWrong, fmt.Sprintf("round %d path %v: byte %d of %d differs (got %#x want %#x)", k, path, i, len(want), got[i], want[i]), nil
		}
		return stressOK, "", nil
	}
	eager := func() (coll.Path, error) { return call(0) }
	syncW := func() error { return w.Synchronize(ctx) }
	if c.graph == 0 {
		code, why, err := round(0, eager, syncW)
		return code, 1, why, err
	}
	// Captured once (no registration happens during capture: the scope has
	// ended), then replayed with an eager call of the same case between
	// replays.
	if err := cudadrv.BeginCapture(bctx, s); err != nil {
		return 0, 0, "", err
	}
	cpath, cerr := call(s.Handle()) // the path the captured call took: replays compare as it must
	gr, err := cudadrv.EndCapture(bctx, s)
	if cerr != nil {
		if gr != nil {
			gr.Destroy()
		}
		if refused(cerr) {
			return stressRefused, 0, cerr.Error(), nil
		}
		return 0, 0, "", fmt.Errorf("capture: %w", cerr)
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("end capture: %w", err)
	}
	defer gr.Destroy()
	replay := func() (coll.Path, error) { return cpath, gr.Launch(s) }
	waitS := func() error { return s.Wait(ctx, 60*time.Second) }
	checked := 0
	for k := 0; k < c.graph; k++ {
		code, why, err := round(2*k, replay, waitS)
		if err != nil || code != stressOK {
			return code, checked, why, err
		}
		checked++
		if code, why, err = round(2*k+1, eager, syncW); err != nil || code != stressOK {
			return code, checked, why, err
		}
		checked++
	}
	return stressOK, checked, "", nil
}

// stressCompare returns the first byte index where got differs from want,
// or -1. Results are bit-exact except NCCL's floating-point sums and
// averages (and hier's, whose steps across hosts are NCCL's): NCCL orders
// and rounds them its own way, so they are compared within a relative
// tolerance.
func stressCompare(c stressCase, n int64, path coll.Path, got, want []byte) int {
	if len(got) != len(want) {
		return 0
	}
	nccl := path.Algo == coll.AlgoNCCL || path.Algo == coll.AlgoNCCLWindow || path.Algo == coll.AlgoHier
	if !nccl || (c.op != coll.Sum && c.op != coll.Avg) || (c.kind != coll.AllReduce && c.kind != coll.ReduceScatter) {
		return firstDiffByte(got, want)
	}
	es := c.dt.Size()
	for i := 0; i+es <= len(got); i += es {
		var a, b, tol float64
		switch c.dt {
		case coll.Float32:
			a, b, tol = float64(math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))), float64(math.Float32frombits(binary.LittleEndian.Uint32(want[i:]))), 1e-5
		case coll.Float64:
			a, b, tol = math.Float64frombits(binary.LittleEndian.Uint64(got[i:])), math.Float64frombits(binary.LittleEndian.Uint64(want[i:])), 1e-12
		case coll.BFloat16:
			a, b, tol = float64(reduce.BF16ToF32(binary.LittleEndian.Uint16(got[i:]))), float64(reduce.BF16ToF32(binary.LittleEndian.Uint16(want[i:]))), 2e-2
		case coll.Float16:
			a, b, tol = float64(reduce.F16ToF32(binary.LittleEndian.Uint16(got[i:]))), float64(reduce.F16ToF32(binary.LittleEndian.Uint16(want[i:]))), 4e-3
		default:
			if !bytes.Equal(got[i:i+es], want[i:i+es]) {
				return i
			}
			continue
		}
		if math.Abs(a-b) > tol*float64(n)*(1+math.Abs(b)) {
			return i
		}
	}
	return -1
}

// firstDiffByte is the first index where a and b differ, or -1.
func firstDiffByte(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
