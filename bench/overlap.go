package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
)

// The overlap benchmark: how much of a collective hides behind GEMMs that
// run at the same time on another stream, per algorithm (PyTorch #130583,
// #176613: copy-engine collectives leave the SMs to the GEMMs), and the
// FSDP-shaped case of PyTorch #172714 (one all-gather beside one GEMM per
// iteration, sequential vs overlapped).

// Overlapper is a Target that can also run GEMMs on a compute stream and
// collectives on a communication stream, timing both with device events
// from one common start.
type Overlapper interface {
	Target
	// Algos lists the algorithms the backend may be forced to for k,
	// besides auto (the world's own list: new paths appear by themselves).
	Algos(k coll.Kind) []coll.Algo
	// SetupGEMM allocates the operands of an M×N×K GEMM and fills them
	// with random data (once, before any Trial).
	SetupGEMM(s GEMMShape) error
	// Trial runs one trial and returns its device times; see Trial.
	Trial(tr Trial) (TrialTimes, error)
}

// GEMMShape is the GEMM every trial runs: bf16 inputs, f32 accumulation.
type GEMMShape struct{ M, N, K int }

// Flops of one GEMM.
func (g GEMMShape) Flops() float64 { return 2 * float64(g.M) * float64(g.N) * float64(g.K) }

// Mode says which streams a trial uses and how they are ordered.
type Mode int

const (
	GEMMOnly   Mode = iota // only the GEMMs
	CommOnly               // only the collectives
	Overlapped             // both from the common start of each iteration
	Sequential             // each iteration's collectives after its GEMMs
)

func (m Mode) String() string {
	return [...]string{"gemm-only", "comm-only", "overlapped", "sequential"}[m]
}

// Call is one collective as Target.Run takes it.
type Call struct {
	K       coll.Kind
	Out, In coll.Span
	Count   int64
	DType   coll.DType
	Op      coll.ReduceOp
	Algo    coll.Algo
}

// Trial is Iters iterations of GEMMs GEMMs on the compute stream and Calls
// collectives on the communication stream. Both streams start together
// (a device-side gate opens after everything is enqueued, so the host's
// enqueue time is not measured) and join at the end of every iteration.
type Trial struct {
	Mode  Mode
	Iters int
	GEMMs int // per iteration
	Calls int // per iteration
	Call  Call
}

// TrialTimes are device times from the common start, in milliseconds.
type TrialTimes struct {
	Total float64 // until both streams finished
	GEMM  float64 // until the last GEMM finished (0 without GEMMs)
	Comm  float64 // until the last collective finished (0 without collectives)
	Path  coll.Path
}

// OverlapConfig is one run of the overlap benchmark; every rank passes an
// equal one to RunOverlap.
type OverlapConfig struct {
	GEMM     GEMMShape
	GEMMs    int           // GEMMs per trial (default 30)
	Ops      []coll.Kind   // all-gather, reduce-scatter or all-reduce, one case each
	Bytes    int64         // full-tensor bytes of one collective (nccl-tests' size)
	DType    coll.DType    // of the collective
	RedOp    coll.ReduceOp // reduce-scatter and all-reduce
	Calls    int           // collectives per trial (default 10)
	Algos    []coll.Algo   // empty: auto and every algorithm the target lists for the op
	Warmup   int           // untimed trials before each measurement
	Reps     int           // timed repetitions; medians are reported
	FSDP     bool          // also run the FSDP case
	FSDPRank int64         // per-rank bytes of the FSDP all-gather (64 MiB)
	FSDPIter int           // iterations per FSDP trial
	Seed     uint64
	Progress io.Writer // a line per measurement on rank 0
}

// Validate reports the first invalid setting for n ranks, without a
// package prefix (RunOverlap adds "bench: ").
func (c *OverlapConfig) Validate(n int) error {
	switch {
	case c.GEMM.M <= 0 || c.GEMM.N <= 0 || c.GEMM.K <= 0:
		return fmt.Errorf("GEMM %dx%dx%d: every dimension must be positive", c.GEMM.M, c.GEMM.N, c.GEMM.K)
	case c.GEMM.M > math.MaxInt32 || c.GEMM.N > math.MaxInt32 || c.GEMM.K > math.MaxInt32:
		return fmt.Errorf("GEMM %dx%dx%d: dimensions must be below 2^31", c.GEMM.M, c.GEMM.N, c.GEMM.K)
	case c.GEMMs < 1:
		return fmt.Errorf("--gemms %d: need at least 1 GEMM per trial", c.GEMMs)
	case c.Calls < 1:
		return fmt.Errorf("--calls %d: need at least 1 collective per trial", c.Calls)
	case len(c.Ops) == 0:
		return fmt.Errorf("no ops to run")
	case !c.DType.Valid():
		return fmt.Errorf("invalid dtype %v", c.DType)
	case c.Reps < 1:
		return fmt.Errorf("--reps %d: need at least 1 repetition", c.Reps)
	case c.Warmup < 0:
		return fmt.Errorf("-w/--warmup %d: must not be negative (0: no warmup)", c.Warmup)
	case c.FSDP && (c.FSDPRank < int64(c.DType.Size()) || c.FSDPIter < 1):
		return fmt.Errorf("FSDP case needs a positive per-rank size (got %d bytes) and iterations (got %d)", c.FSDPRank, c.FSDPIter)
	}
	for _, k := range c.Ops {
		if k != coll.AllGather && k != coll.ReduceScatter && k != coll.AllReduce {
			return fmt.Errorf("overlap op %v: want all_gather, reduce_scatter or all_reduce", k)
		}
		if l := layoutFor(k, c.Bytes, c.DType.Size(), n); l.perRank == 0 {
			return fmt.Errorf("--size %d bytes: below one %s element per rank for %d ranks", c.Bytes, TypeName(c.DType), n)
		}
	}
	return nil
}

type overlapRun struct {
	t       Overlapper
	cfg     OverlapConfig
	n, rank int
	x       *exchanger
	in, out coll.Span
	got     []byte
	want    []byte
}

// RunOverlap runs the overlap benchmark; it is collective over the ranks.
func RunOverlap(t Overlapper, cfg OverlapConfig) (*OverlapReport, error) {
	n := t.Size()
	if err := cfg.Validate(n); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	algos := func(k coll.Kind) []coll.Algo {
		if len(cfg.Algos) > 0 {
			return cfg.Algos
		}
		return append([]coll.Algo{coll.AlgoAuto}, t.Algos(k)...)
	}
	r := &overlapRun{t: t, cfg: cfg, n: n, rank: t.Rank()}
	var inB, outB int64
	for _, k := range cfg.Ops {
		l := layoutFor(k, cfg.Bytes, cfg.DType.Size(), n)
		inB, outB = max(inB, l.inBytes), max(outB, l.outBytes)
	}
	var fsdp layout
	if cfg.FSDP {
		fsdp = layoutFor(coll.AllGather, cfg.FSDPRank*int64(n), cfg.DType.Size(), n)
		inB, outB = max(inB, fsdp.inBytes), max(outB, fsdp.outBytes)
	}
	if mc, ok := t.(interface{ CheckFits(int64) error }); ok {
		if err := mc.CheckFits(inB + outB); err != nil {
			return nil, fmt.Errorf("bench: overlap needs %s of input and %s of output buffers on every rank: %w; lower --size (or --fsdp-size)", FormatSize(inB), FormatSize(outB), err)
		}
	}
	var err error
	if r.x, err = newExchanger(t, 4); err != nil {
		return nil, err
	}
	defer r.x.close()
	if r.in, err = t.Alloc(inB, true); err != nil {
		return nil, fmt.Errorf("bench: allocating the %s input: %w", FormatSize(inB), err)
	}
	defer t.Free(r.in)
	if r.out, err = t.Alloc(outB, true); err != nil {
		return nil, fmt.Errorf("bench: allocating the %s output: %w", FormatSize(outB), err)
	}
	defer t.Free(r.out)
	scratch := min(chunk, max(inB, outB))
	r.got, r.want = make([]byte, scratch), make([]byte, scratch)
	if err := t.SetupGEMM(cfg.GEMM); err != nil {
		return nil, fmt.Errorf("bench: GEMM %dx%dx%d: %w", cfg.GEMM.M, cfg.GEMM.N, cfg.GEMM.K, err)
	}
	rep := &OverlapReport{Schema: SchemaVersion, Kind: "overlap", Backend: t.Name(), Ranks: n, GEMM: cfg.GEMM, GEMMs: cfg.GEMMs,
		DType: TypeName(cfg.DType), Calls: cfg.Calls,
		Warmup: cfg.Warmup, Reps: cfg.Reps, Seed: cfg.Seed, Date: time.Now().UTC().Format(time.RFC3339)}
	start := time.Now()
	var gemmAll []float64
	for ki, k := range cfg.Ops {
		l := layoutFor(k, cfg.Bytes, cfg.DType.Size(), n)
		c := OverlapCase{Op: k.String(), Bytes: l.bytes, RedOp: "none"}
		if k != coll.AllGather {
			c.RedOp = cfg.RedOp.String()
		}
		for ai, a := range algos(k) {
			row, err := r.mainRow(k, ki, ai, a, l)
			if err != nil {
				return nil, err
			}
			gemmAll = append(gemmAll, row.Raw.GEMM...)
			c.Rows = append(c.Rows, row)
			r.progress("%s %s: %s", k, a, row.summary())
		}
		rep.Cases = append(rep.Cases, c)
	}
	if len(gemmAll) > 0 {
		rep.GEMMMs = median(gemmAll)
		rep.TFlops = cfg.GEMM.Flops() * float64(cfg.GEMMs) / (rep.GEMMMs * 1e-3) / 1e12
	}
	if cfg.FSDP {
		rep.FSDPRank, rep.FSDPIter = fsdp.inBytes, cfg.FSDPIter
		for ai, a := range algos(coll.AllGather) {
			row, err := r.fsdpRow(ai, a, fsdp)
			if err != nil {
				return nil, err
			}
			rep.FSDP = append(rep.FSDP, row)
			r.progress("fsdp %s: %s", a, row.summary())
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func (r *overlapRun) progress(format string, args ...any) {
	if r.cfg.Progress != nil && r.rank == 0 {
		fmt.Fprintf(r.cfg.Progress, "bench overlap: "+format+"\n", args...)
	}
}

// call builds the collective of layout l (out of place).
func (r *overlapRun) call(k coll.Kind, a coll.Algo, l layout) Call {
	return Call{K: k, Out: sub(r.out, 0, l.outBytes), In: sub(r.in, 0, l.inBytes), Count: l.runCount,
		DType: r.cfg.DType, Op: r.cfg.RedOp, Algo: a}
}

// check runs c once on the communication stream with fresh random input,
// verifies the output, and returns the path and the wrong elements summed
// over ranks; refused is the backend's reason when the algorithm cannot
// run this call (every rank must agree).
func (r *overlapRun) check(c Call, l layout, seedParts ...uint64) (path coll.Path, wrong int64, refused string, err error) {
	d := &caseData{k: c.K, dt: c.DType, op: c.Op, n: r.n, rank: r.rank, l: l, seeds: make([]uint64, r.n)}
	for i := range d.seeds {
		d.seeds[i] = seedFor(r.cfg.Seed, append(slices.Clone(seedParts), uint64(i))...)
	}
	d.trash = seedFor(r.cfg.Seed, append(slices.Clone(seedParts), 1<<32+uint64(r.rank))...)
	if err := writeTrash(r.t, c.Out, d.trash, r.got); err != nil {
		return path, 0, "", err
	}
	if err := d.writeInput(r.t, c.In, r.got); err != nil {
		return path, 0, "", err
	}
	if err := r.t.Barrier(); err != nil {
		return path, 0, "", err
	}
	tt, err := r.t.Trial(Trial{Mode: CommOnly, Iters: 1, Calls: 1, Call: c})
	isRefused := errors.Is(err, errs.Refused) || errors.Is(err, errs.NotSupported)
	if err != nil && !isRefused {
		return path, 0, "", err
	}
	flags, xerr := r.x.exchange([]float64{b2f(isRefused), 0, 0, 0})
	if xerr != nil {
		return path, 0, "", xerr
	}
	if slices.ContainsFunc(flags, func(v []float64) bool { return (v[0] == 1) != isRefused }) {
		return path, 0, "", fmt.Errorf("bench: ranks disagree whether --algo %s can run %v (this rank: %v)", c.Algo, c.K, err)
	}
	if isRefused {
		return path, 0, err.Error(), nil
	}
	w, err := d.verify(r.t, c.Out, r.got, r.want)
	if err != nil {
		return path, 0, "", err
	}
	all, err := r.x.exchange([]float64{float64(w), 0, 0, 0})
	if err != nil {
		return path, 0, "", err
	}
	for _, v := range all {
		wrong += int64(v[0])
	}
	return tt.Path, wrong, "", nil
}

// measure runs warm-ups, then one timed trial of each of trials per
// repetition (interleaved, so drift spreads over all), and returns per
// trial and repetition the maximum over ranks of each time.
func (r *overlapRun) measure(trials []Trial) ([][]TrialTimes, error) {
	for _, tr := range trials {
		for i := 0; i < r.cfg.Warmup; i++ {
			if _, err := r.t.Trial(tr); err != nil {
				return nil, fmt.Errorf("bench: %s warm-up: %w", tr.Mode, err)
			}
		}
	}
	out := make([][]TrialTimes, len(trials))
	for rep := 0; rep < r.cfg.Reps; rep++ {
		for i, tr := range trials {
			if err := r.t.Barrier(); err != nil {
				return nil, err
			}
			tt, err := r.t.Trial(tr)
			if err != nil {
				return nil, fmt.Errorf("bench: %s trial: %w", tr.Mode, err)
			}
			all, err := r.x.exchange([]float64{tt.Total, tt.GEMM, tt.Comm, 0})
			if err != nil {
				return nil, err
			}
			var m TrialTimes
			for _, v := range all {
				m.Total, m.GEMM, m.Comm = max(m.Total, v[0]), max(m.GEMM, v[1]), max(m.Comm, v[2])
			}
			out[i] = append(out[i], m)
		}
	}
	return out, nil
}

func (r *overlapRun) mainRow(k coll.Kind, ki, ai int, a coll.Algo, l layout) (OverlapRow, error) {
	cfg := &r.cfg
	row := OverlapRow{Algo: string(a)}
	c := r.call(k, a, l)
	path, wrong, refused, err := r.check(c, l, 0, uint64(ki), uint64(ai))
	if err != nil {
		return row, fmt.Errorf("bench: checking %v %s (algo %s): %w", k, FormatSize(l.bytes), a, err)
	}
	row.Path, row.Reason, row.Wrong = string(path.Algo), path.Reason, wrong
	if refused != "" {
		row.Path, row.Refused = "refused", refused
		return row, nil
	}
	res, err := r.measure([]Trial{
		{Mode: GEMMOnly, Iters: 1, GEMMs: cfg.GEMMs},
		{Mode: CommOnly, Iters: 1, Calls: cfg.Calls, Call: c},
		{Mode: Overlapped, Iters: 1, GEMMs: cfg.GEMMs, Calls: cfg.Calls, Call: c},
	})
	if err != nil {
		return row, fmt.Errorf("bench: %v %s (algo %s): %w", k, FormatSize(l.bytes), a, err)
	}
	for i := range res[0] {
		row.Raw.GEMM = append(row.Raw.GEMM, res[0][i].Total)
		row.Raw.Comm = append(row.Raw.Comm, res[1][i].Total)
		row.Raw.Both = append(row.Raw.Both, res[2][i].Total)
		row.Raw.GEMMIn = append(row.Raw.GEMMIn, res[2][i].GEMM)
	}
	row.GEMMMs, row.CommMs = median(row.Raw.GEMM), median(row.Raw.Comm)
	row.BothMs, row.GEMMInMs = median(row.Raw.Both), median(row.Raw.GEMMIn)
	row.Hidden, row.Slowdown = Hidden(row.GEMMMs, row.CommMs, row.BothMs), row.GEMMInMs/row.GEMMMs-1
	_, row.BusBW = Bandwidth(k, r.n, l.bytes, row.CommMs*1e3/float64(cfg.Calls))
	return row, nil
}

func (r *overlapRun) fsdpRow(ai int, a coll.Algo, l layout) (FSDPRow, error) {
	cfg := &r.cfg
	row := FSDPRow{Algo: string(a)}
	c := r.call(coll.AllGather, a, l)
	path, wrong, refused, err := r.check(c, l, 1, 0, uint64(ai))
	if err != nil {
		return row, fmt.Errorf("bench: checking the FSDP all-gather (algo %s): %w", a, err)
	}
	row.Path, row.Wrong = string(path.Algo), wrong
	if refused != "" {
		row.Path, row.Refused = "refused", refused
		return row, nil
	}
	it := cfg.FSDPIter
	res, err := r.measure([]Trial{
		{Mode: GEMMOnly, Iters: it, GEMMs: 1},
		{Mode: CommOnly, Iters: it, Calls: 1, Call: c},
		{Mode: Sequential, Iters: it, GEMMs: 1, Calls: 1, Call: c},
		{Mode: Overlapped, Iters: it, GEMMs: 1, Calls: 1, Call: c},
	})
	if err != nil {
		return row, fmt.Errorf("bench: FSDP case (algo %s): %w", a, err)
	}
	per := func(i int) float64 {
		v := make([]float64, len(res[i]))
		for j, tt := range res[i] {
			v[j] = tt.Total / float64(it)
		}
		return median(v)
	}
	row.GEMMMs, row.CommMs, row.Sequential, row.Overlapped = per(0), per(1), per(2), per(3)
	if row.Overlapped > 0 {
		row.Speedup = row.Sequential / row.Overlapped
	}
	if row.CommMs > 0 {
		row.Hidden = (row.Sequential - row.Overlapped) / row.CommMs
	}
	return row, nil
}

// Hidden is the fraction of the communication time that the overlap hid:
// (gemm + comm − together) / comm.
func Hidden(gemm, comm, together float64) float64 {
	if comm <= 0 {
		return 0
	}
	return (gemm + comm - together) / comm
}

// median of v (the mean of the middle two for an even count); v is not
// modified.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
