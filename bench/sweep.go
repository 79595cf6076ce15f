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

// Config is one sweep. Every rank passes an equal Config to Run.
type Config struct {
	Ops        []coll.Kind
	Algos      []coll.Algo // default {auto}
	Sizes      []int64     // full-tensor bytes (nccl-tests "size"), see Sizes
	DType      coll.DType
	RedOp      coll.ReduceOp // reduce-scatter and all-reduce
	Root       int           // broadcast root
	OutOfPlace bool          // measure out-of-place calls
	InPlace    bool          // measure in-place calls
	Plain      bool          // ordinary (non-symmetric) buffers: the staged path
	// Offset moves the input and output this many bytes past the start
	// of their allocations (a multiple of the element size, below
	// MaxOffset): buffers off the 16-byte alignment the paths' vector
	// modes want, to time their element modes and staging.
	Offset   int64
	Check    bool          // verify every size against the serial reference
	Iters    int           // timed iterations per size (the maximum when Budget > 0)
	MinIters int           // the minimum when Budget > 0 (default 3)
	Warmup   int           // untimed iterations before timing (at most Iters)
	Budget   time.Duration // adaptive: aim for this much timed work per size; 0 = always Iters
	Rounds   int           // repeat each size this many times, keep the fastest (default 1); the first round checks
	// NoMemcpy skips the memcpy baseline (two local copies timed around
	// each round of each row): symmem tune, whose table does not use it.
	// Rows then have no memcpy_gbps and no busbw/memcpy.
	NoMemcpy bool
	// BySize measures every algorithm at one size before the next size,
	// each round of every algorithm in turn (rows still come out algorithm
	// by algorithm, at the end of each op): paths compared at a size are
	// then measured moments apart, not a whole sweep apart, so a machine's
	// drift does not pick the winner (symmem tune: at ~10 us a machine
	// drifts by more than the paths differ).
	BySize bool
	// Graph, if positive, times CUDA-graph replays instead of eager calls:
	// each replay launches a graph of Graph captured calls (the Target must
	// be a Grapher); the time column is per call.
	Graph int
	// Samples is how many calls, at most the timed iteration count, are
	// also timed one by one (each followed by Sync) for the p50/p99
	// latencies; 0 skips them.
	Samples  int
	Seed     uint64
	Progress io.Writer // a line per size on rank 0; nil = quiet
	// OnRow, if set, is called on rank 0 as each size completes (with
	// BySize: for each row at the end of its op), with the report so far
	// (its settings filled in) and the new row: a Table prints it at once.
	OnRow func(rep *Report, res Result) error
}

// AlgoChecker is optional: a Target that knows which algorithms it supports
// rejects a combination before the sweep starts, with a clear error.
type AlgoChecker interface {
	CheckAlgo(k coll.Kind, a coll.Algo) error
}

// Validate reports the first invalid setting of c for n ranks, naming the
// setting by its flag and without a package prefix (the CLI adds its own;
// Run adds "bench: ").
func (c *Config) Validate(n int) error {
	switch {
	case len(c.Ops) == 0:
		return fmt.Errorf("no ops to run")
	case len(c.Sizes) == 0:
		return fmt.Errorf("no sizes to run")
	case !c.DType.Valid():
		return fmt.Errorf("invalid dtype %v", c.DType)
	case c.RedOp < coll.Sum || c.RedOp > coll.Max:
		return fmt.Errorf("invalid reduction %v", c.RedOp)
	case c.Root < 0 || c.Root >= n:
		return fmt.Errorf("-r/--root %d: outside the %d ranks (want 0 to %d)", c.Root, n, n-1)
	case !c.OutOfPlace && !c.InPlace:
		return fmt.Errorf("neither out-of-place nor in-place selected")
	case c.Iters < 1:
		return fmt.Errorf("-n/--iters %d: need at least 1 timed iteration", c.Iters)
	case c.Warmup < 0:
		return fmt.Errorf("-w/--warmup %d: must not be negative (0: no warmup)", c.Warmup)
	case c.Rounds < 0:
		return fmt.Errorf("--rounds %d: must not be negative", c.Rounds)
	case c.Graph < 0:
		return fmt.Errorf("-G/--cudagraph %d: must not be negative (0: eager calls)", c.Graph)
	case c.Samples < 0:
		return fmt.Errorf("--samples %d: must not be negative (0: off)", c.Samples)
	}
	for _, k := range c.Ops {
		if k < coll.AllGather || k > coll.AllToAll {
			return fmt.Errorf("invalid op %v", k)
		}
	}
	return nil
}

// iterations picks the timed and warmup iteration counts from the time one
// call took (the maximum over ranks, so every rank picks the same).
func (c *Config) iterations(one time.Duration) (iters, warmup int) {
	iters = c.Iters
	if c.Budget > 0 && one > 0 {
		lo := max(1, min(c.MinIters, c.Iters))
		if c.MinIters == 0 {
			lo = min(3, c.Iters)
		}
		iters = max(lo, min(c.Iters, int(c.Budget/one)))
	}
	return iters, min(c.Warmup, iters)
}

type sweep struct {
	t       Target
	cfg     Config
	n, rank int
	x       *exchanger
	in, out coll.Span // the biggest size, reused
	got     []byte    // host scratch
	want    []byte
}

// MaxOffset bounds Config.Offset.
const MaxOffset = 4096

// CheckOffset says what is wrong with a Config.Offset for elements of dt
// (without a package prefix, as Validate).
func CheckOffset(off int64, dt coll.DType) error {
	if off < 0 || off >= MaxOffset || off%int64(dt.Size()) != 0 {
		return fmt.Errorf("--offset %d: want a multiple of %v's %d-byte elements from 0 to %d (buffers start at whole elements)", off, dt, dt.Size(), MaxOffset-1)
	}
	return nil
}

// Run executes the sweep; it is collective over the ranks of t. The report
// is the same on every rank.
func Run(t Target, cfg Config) (*Report, error) {
	if len(cfg.Algos) == 0 {
		cfg.Algos = []coll.Algo{coll.AlgoAuto}
	}
	if err := cfg.Validate(t.Size()); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	// An op/algorithm pair the backend does not have (two-shot has no
	// all-gather path; the CPU backend has none of the GPU paths) is
	// skipped with the reason, as a refused call is a row that says why:
	// the other pairs still run. Only a sweep with no pair left fails.
	var skipped []Skip
	skip := map[[2]int]bool{}
	var mask uint64 // bit per skipped pair, compared across ranks below
	if ac, ok := t.(AlgoChecker); ok {
		for ki, k := range cfg.Ops {
			for ai, a := range cfg.Algos {
				if err := ac.CheckAlgo(k, a); err != nil {
					skipped = append(skipped, Skip{Op: k.String(), Algo: string(a), Reason: err.Error()})
					skip[[2]int{ki, ai}] = true
					mask |= 1 << uint(ki*len(cfg.Algos)+ai)
				}
			}
		}
	}
	if len(skip) == len(cfg.Ops)*len(cfg.Algos) {
		return nil, fmt.Errorf("bench: no op/algorithm pair can run on backend %s: %s", t.Name(), skipped[0].Reason)
	}
	if _, ok := t.(Grapher); cfg.Graph > 0 && !ok {
		return nil, fmt.Errorf("bench: -G %d: the %s target cannot capture CUDA graphs", cfg.Graph, t.Name())
	}
	s := &sweep{t: t, cfg: cfg, n: t.Size(), rank: t.Rank()}
	if err := CheckOffset(cfg.Offset, cfg.DType); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var maxBytes int64
	for _, b := range cfg.Sizes {
		maxBytes = max(maxBytes, b)
	}
	// Ordinary buffers (Plain) take the same memory, from the process
	// instead of the pool: a sweep too big for it would die in the
	// allocator (Go's "fatal error: out of memory") instead of saying so.
	if mc, ok := t.(interface{ CheckFits(int64) error }); ok {
		if err := mc.CheckFits(2 * (maxBytes + cfg.Offset)); err != nil {
			return nil, fmt.Errorf("bench: the sweep's largest size (-e/--maxbytes %s) needs an input and an output buffer of that size on every rank: %w; lower -e/--maxbytes, or run fewer ranks on this host",
				FormatSize(maxBytes), err)
		}
	}
	var err error
	if s.x, err = newExchanger(t, 2); err != nil {
		return nil, err
	}
	defer s.x.close()
	if len(skip) > 0 {
		// A pair some ranks would run and others skip would hang the
		// ones that run it. (At most 4 ops x 10 algorithms: the mask fits
		// a float64 exactly.)
		flags, err := s.x.exchange([]float64{float64(mask), 0})
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(flags, func(v []float64) bool { return v[0] != float64(mask) }) {
			return nil, fmt.Errorf("bench: ranks disagree which op/algorithm pairs the %s backend has (this rank skips: %v)", t.Name(), skipped)
		}
	}
	in, err := t.Alloc(maxBytes+cfg.Offset, !cfg.Plain)
	if err != nil {
		return nil, fmt.Errorf("bench: allocating %s input buffer: %w", FormatSize(maxBytes), err)
	}
	defer t.Free(in)
	out, err := t.Alloc(maxBytes+cfg.Offset, !cfg.Plain)
	if err != nil {
		return nil, fmt.Errorf("bench: allocating %s output buffer: %w", FormatSize(maxBytes), err)
	}
	defer t.Free(out)
	s.in, s.out = sub(in, cfg.Offset, maxBytes), sub(out, cfg.Offset, maxBytes)
	s.got, s.want = make([]byte, min(chunk, maxBytes)), make([]byte, min(chunk, maxBytes))

	rep := &Report{Schema: SchemaVersion, Backend: t.Name(), Ranks: s.n, DType: TypeName(cfg.DType), RedOp: cfg.RedOp.String(),
		Root: cfg.Root, Symmetric: !cfg.Plain, Offset: cfg.Offset, Checked: cfg.Check, Seed: cfg.Seed, Rounds: max(1, cfg.Rounds), NoMemcpy: cfg.NoMemcpy,
		Date: time.Now().UTC().Format(time.RFC3339), Skipped: skipped}
	if mt, ok := t.(MemcpyThreader); ok {
		rep.MemcpyThreads = mt.MemcpyThreads()
	}
	start := time.Now()
	rows := (len(cfg.Ops)*len(cfg.Algos) - len(skip)) * len(cfg.Sizes)
	row := 0
	emit := func(res Result) error {
		rep.Results = append(rep.Results, res)
		if cfg.OnRow != nil && s.rank == 0 {
			if err := cfg.OnRow(rep, res); err != nil {
				return fmt.Errorf("bench: writing the %s row: %w", FormatSize(res.Bytes), err)
			}
		}
		return nil
	}
	for ki, k := range cfg.Ops {
		first := len(rep.Results)
		algos := slices.DeleteFunc(slices.Clone(cfg.Algos), func(a coll.Algo) bool {
			return skip[[2]int{ki, slices.Index(cfg.Algos, a)}]
		})
		if cfg.BySize {
			// Size by size; at each size every round measures every
			// algorithm in turn, so the paths compared are measured
			// moments apart. Rows are emitted algorithm by algorithm.
			held := make([][]Result, len(algos))
			for si, size := range cfg.Sizes {
				l := layoutFor(k, size, cfg.DType.Size(), s.n)
				if l.perRank == 0 {
					row += len(algos)
					continue // too small for whole elements on every rank
				}
				accs := make([]rowAcc, len(algos))
				for ai, a := range algos {
					accs[ai] = s.newRow(k, a, l)
				}
				for round := 0; round < max(1, cfg.Rounds); round++ {
					for ai, a := range algos {
						if err := s.round(&accs[ai], k, a, slices.Index(cfg.Algos, a), si, round, l); err != nil {
							return nil, err
						}
					}
				}
				for ai := range algos {
					row++
					res := accs[ai].finish(l)
					if cfg.Progress != nil && s.rank == 0 {
						fmt.Fprintf(cfg.Progress, "bench: [%d/%d %.1fs] %s\n", row, rows, time.Since(start).Seconds(), res.summary())
					}
					held[ai] = append(held[ai], res)
				}
			}
			for _, rs := range held {
				for _, res := range rs {
					if err := emit(res); err != nil {
						return nil, err
					}
				}
			}
		} else {
			for _, a := range algos {
				for si, size := range cfg.Sizes {
					row++
					l := layoutFor(k, size, cfg.DType.Size(), s.n)
					if l.perRank == 0 {
						continue // too small for whole elements on every rank
					}
					res, err := s.row(k, a, slices.Index(cfg.Algos, a), si, l)
					if err != nil {
						return nil, err
					}
					if cfg.Progress != nil && s.rank == 0 {
						fmt.Fprintf(cfg.Progress, "bench: [%d/%d %.1fs] %s\n", row, rows, time.Since(start).Seconds(), res.summary())
					}
					if err := emit(res); err != nil {
						return nil, err
					}
				}
			}
		}
		// Every algorithm of op k is measured: auto's rows get auto/best
		// (before the next op's first row, which prints k's summary).
		fillAutoBest(rep.Results[first:])
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// row measures one op/algo/size: the placements and the memcpy baseline,
// in s.cfg.Rounds rounds.
func (s *sweep) row(k coll.Kind, a coll.Algo, ai, si int, l layout) (Result, error) {
	acc := s.newRow(k, a, l)
	for round := 0; round < max(1, s.cfg.Rounds); round++ {
		if err := s.round(&acc, k, a, ai, si, round, l); err != nil {
			return acc.res, err
		}
	}
	return acc.finish(l), nil
}

// rowAcc is a row measured round by round: the fastest round of each
// placement and the fastest memcpy so far.
type rowAcc struct {
	res  Result
	best float64 // fastest memcpy baseline, seconds
}

func (s *sweep) newRow(k coll.Kind, a coll.Algo, l layout) rowAcc {
	res := Result{Op: k.String(), Algo: string(a), Bytes: l.bytes, Count: l.total, Type: TypeName(s.cfg.DType),
		RedOp: "none", Root: -1}
	if k == coll.ReduceScatter || k == coll.AllReduce {
		res.RedOp = s.cfg.RedOp.String()
	}
	if k == coll.Broadcast {
		res.Root = s.cfg.Root
	}
	return rowAcc{res: res, best: math.Inf(1)}
}

// round measures one round of a row: the memcpy baseline, then every
// placement, then memcpy again. The fastest memcpy and the fastest round of
// each placement are kept: the same rule on both sides of busbw/memcpy, and
// alternating rounds spread slow moments of a shared machine over both.
func (s *sweep) round(acc *rowAcc, k coll.Kind, a coll.Algo, ai, si, round int, l layout) error {
	res := &acc.res
	mc0 := math.Inf(1)
	if !s.cfg.NoMemcpy {
		var err error
		if mc0, err = s.memcpy(l.bytes, s.cfg.Iters, true); err != nil {
			return fmt.Errorf("bench: memcpy baseline %s: %w", FormatSize(l.bytes), err)
		}
	}
	iters := 0
	for _, inPlace := range []bool{false, true} {
		if (inPlace && !s.cfg.InPlace) || (!inPlace && !s.cfg.OutOfPlace) || inPlace && k == coll.AllToAll { // all-to-all is out of place only
			continue
		}
		m, err := s.measure(k, a, ai, si, round, l, inPlace)
		if err != nil {
			return fmt.Errorf("bench: %v %s %s (algo %s, in-place %v): %w", k, FormatSize(l.bytes), s.cfg.DType, a, inPlace, err)
		}
		if m.Refused != "" {
			if inPlace {
				res.InPlace = m
			} else {
				res.OutOfPlace = m
			}
			continue
		}
		m.AlgBW, m.BusBW = Bandwidth(k, s.n, l.bytes, m.TimeUs)
		iters = max(iters, m.Iters)
		keep := &res.OutOfPlace
		if inPlace {
			keep = &res.InPlace
		}
		if *keep != nil {
			m.Wrong += (*keep).Wrong
			if (*keep).TimeUs < m.TimeUs {
				(*keep).Wrong = m.Wrong
				m = *keep
			}
		}
		*keep = m
	}
	if s.cfg.NoMemcpy {
		return nil
	}
	mc, err := s.memcpy(l.bytes, iters, false)
	if err != nil {
		return fmt.Errorf("bench: memcpy baseline %s: %w", FormatSize(l.bytes), err)
	}
	acc.best = min(acc.best, mc, mc0)
	return nil
}

// finish completes the row: the memcpy baseline and each placement's share
// of it.
func (acc *rowAcc) finish(l layout) Result {
	res := acc.res
	if math.IsInf(acc.best, 1) { // no baseline (NoMemcpy)
		return res
	}
	res.MemcpyGBps = float64(l.bytes) / acc.best / 1e9
	for _, m := range []*Measure{res.OutOfPlace, res.InPlace} {
		if m != nil && m.Refused == "" {
			m.VsMemcpy = m.BusBW / res.MemcpyGBps
		}
	}
	return res
}

// Bandwidth returns nccl-tests' algbw and busbw in GB/s (1e9 bytes/s) for
// a call on the full tensor of bytes that took us microseconds on n ranks.
func Bandwidth(k coll.Kind, n int, bytes int64, us float64) (algbw, busbw float64) {
	if us <= 0 {
		return 0, 0
	}
	algbw = float64(bytes) / (us * 1e3)
	return algbw, algbw * coll.BusFactor(k, n)
}

// spans returns the input and output of one call, following nccl-tests:
// in-place all-gather reads this rank's slice of the output, in-place
// reduce-scatter writes this rank's slice of the input.
func (s *sweep) spans(k coll.Kind, l layout, inPlace bool) (in, out coll.Span) {
	if !inPlace {
		return sub(s.in, 0, l.inBytes), sub(s.out, 0, l.outBytes)
	}
	switch k {
	case coll.AllGather:
		out = sub(s.out, 0, l.outBytes)
		return sub(out, int64(s.rank)*l.inBytes, l.inBytes), out
	case coll.ReduceScatter:
		in = sub(s.out, 0, l.inBytes)
		return in, sub(in, int64(s.rank)*l.outBytes, l.outBytes)
	}
	out = sub(s.out, 0, l.outBytes)
	return out, out
}

// measure checks one placement once, then times it.
func (s *sweep) measure(k coll.Kind, a coll.Algo, ai, si, round int, l layout, inPlace bool) (*Measure, error) {
	t, cfg := s.t, &s.cfg
	place := uint64(2 * round)
	if inPlace {
		place++
	}
	c := &caseData{k: k, dt: cfg.DType, op: cfg.RedOp, root: cfg.Root, n: s.n, rank: s.rank, l: l,
		seeds: make([]uint64, s.n)}
	for r := range c.seeds {
		c.seeds[r] = seedFor(cfg.Seed, uint64(k), uint64(ai), uint64(si), place, uint64(r))
	}
	c.trash = seedFor(cfg.Seed, uint64(k), uint64(ai), uint64(si), place, 1<<32+uint64(s.rank))
	in, out := s.spans(k, l, inPlace)
	// The first round checks; later ones only time, on what the first
	// left in the buffers (a call's result does not depend on the round,
	// and at large sizes building and comparing every rank's data on the
	// host costs more than the calls timed).
	check := cfg.Check && round == 0
	if check {
		if err := writeTrash(t, out, c.trash, s.got); err != nil {
			return nil, err
		}
		if k != coll.Broadcast || !inPlace || s.rank == cfg.Root {
			if err := c.writeInput(t, in, s.got); err != nil {
				return nil, err
			}
		}
	}
	if err := t.Barrier(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	path, err := t.Run(k, out, in, l.runCount, cfg.DType, cfg.RedOp, cfg.Root, a)
	// A forced algorithm that cannot run this call, or a call no path
	// serves here (ErrNotSupported: a GPU shared by the ranks has no NCCL),
	// is a row that says why, not a failure of the sweep; every rank must
	// have refused alike.
	refused := errors.Is(err, errs.Refused) || errors.Is(err, errs.NotSupported)
	if err != nil && !refused {
		return nil, err
	}
	if flags, xerr := s.x.exchange([]float64{b2f(refused), 0}); xerr != nil {
		return nil, xerr
	} else if mixed := slices.ContainsFunc(flags, func(v []float64) bool { return (v[0] == 1) != refused }); mixed {
		return nil, fmt.Errorf("ranks disagree whether -algo %s can run this call (this rank: %v)", a, err)
	}
	if refused {
		return &Measure{Path: "refused", Refused: err.Error()}, nil
	}
	if err := t.Sync(); err != nil {
		return nil, err
	}
	first := time.Since(t0)
	var wrong int64
	if check {
		if wrong, err = c.verify(t, out, s.got, s.want); err != nil {
			return nil, err
		}
	}
	// The first call pays one-time costs (NCCL's lazy setup, first touch),
	// so size the iteration count from a second, warm call.
	t1 := time.Now()
	if _, err := t.Run(k, out, in, l.runCount, cfg.DType, cfg.RedOp, cfg.Root, a); err != nil {
		return nil, err
	}
	if err := t.Sync(); err != nil {
		return nil, err
	}
	first = min(first, time.Since(t1))
	all, err := s.x.exchange([]float64{float64(wrong), first.Seconds()})
	if err != nil {
		return nil, err
	}
	m := &Measure{Path: string(path.Algo), Staged: path.Staged, Reason: path.Reason}
	var slowest float64
	for _, v := range all {
		m.Wrong += int64(v[0])
		slowest = max(slowest, v[1])
	}
	m.Iters, m.Warmup = cfg.iterations(time.Duration(slowest * 1e9))
	run := func() error {
		_, err := t.Run(k, out, in, l.runCount, cfg.DType, cfg.RedOp, cfg.Root, a)
		return err
	}
	if cfg.Budget > 0 && cfg.Graph == 0 && m.Iters < cfg.Iters {
		// One call may still be slow (first touches, a descheduled
		// rank): where the budget bounds the count, size it again from a
		// batch of an eighth of it (a count sized from the warm-up alone
		// times a fraction of the budget).
		cal, err := s.timed(0, max(2, m.Iters/8), run)
		if err != nil {
			return nil, err
		}
		m.Iters, m.Warmup = cfg.iterations(time.Duration(cal * 1e9))
	}
	if cfg.Graph > 0 {
		if err := s.graphed(m, k, a, out, in, l); err != nil {
			if refusal, ok := err.(graphRefusal); ok {
				return &Measure{Path: "refused", Refused: refusal.Error()}, nil
			}
			return nil, err
		}
		return m, nil
	}
	per, err := s.timed(m.Warmup, m.Iters, run)
	if err != nil {
		return nil, err
	}
	m.TimeUs = per * 1e6
	if n := min(cfg.Samples, m.Iters); n > 0 {
		if err := s.sample(m, n, run); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// graphRefusal is a call that runs eagerly but refuses to be captured
// into a CUDA graph on every rank (a path with no graph support): a
// refused row, as a refused eager call is.
type graphRefusal struct{ error }

// graphed times replays of a graph of cfg.Graph captured calls: about
// m.Iters calls in all (at least one replay), warmed up by one replay. A
// capture every rank refused (errs.Refused, errs.NotSupported) is a
// graphRefusal; one that some ranks refused or failed is an error on
// every rank.
func (s *sweep) graphed(m *Measure, k coll.Kind, a coll.Algo, out, in coll.Span, l layout) error {
	cfg := &s.cfg
	g, err := s.t.(Grapher).Capture(cfg.Graph, k, out, in, l.runCount, cfg.DType, cfg.RedOp, cfg.Root, a)
	// Captured calls move no data, so a rank that failed left no peer
	// waiting; every rank says how its capture went (0 captured, 1
	// refused, 2 failed) and they end alike.
	state := 0.0
	switch {
	case errors.Is(err, errs.Refused) || errors.Is(err, errs.NotSupported):
		state = 1
	case err != nil:
		state = 2
	}
	flags, xerr := s.x.exchange([]float64{state, 0})
	if xerr != nil || state != 0 {
		if g != nil {
			g.Close()
		}
	}
	switch {
	case xerr != nil:
		return xerr
	case state == 2:
		return fmt.Errorf("capturing %d calls into a CUDA graph (-G): %w", cfg.Graph, err)
	case slices.ContainsFunc(flags, func(v []float64) bool { return v[0] == 2 }):
		return fmt.Errorf("capturing %d calls into a CUDA graph (-G): another rank failed to capture -algo %s", cfg.Graph, a)
	case slices.ContainsFunc(flags, func(v []float64) bool { return v[0] != state }):
		return fmt.Errorf("ranks disagree whether -algo %s can be captured into a CUDA graph (this rank: %v)", a, err)
	case state == 1:
		return graphRefusal{fmt.Errorf("in a CUDA graph: %w", err)}
	}
	defer g.Close()
	replays := max(1, m.Iters/cfg.Graph)
	per, err := s.timedSync(min(1, m.Warmup), replays, g.Replay, g.Wait)
	if err != nil {
		return err
	}
	m.TimeUs = per / float64(cfg.Graph) * 1e6
	m.Iters, m.Warmup, m.Graph = replays*cfg.Graph, min(1, m.Warmup)*cfg.Graph, cfg.Graph
	return nil
}

// sample times n calls one by one, each followed by Sync, and sets m's
// p50 and p99 latencies (the maximum over ranks of each).
func (s *sweep) sample(m *Measure, n int, f func() error) error {
	if err := s.t.Barrier(); err != nil {
		return err
	}
	lat := make([]float64, n)
	for i := range lat {
		t0 := time.Now()
		if err := f(); err != nil {
			return err
		}
		if err := s.t.Sync(); err != nil {
			return err
		}
		lat[i] = time.Since(t0).Seconds() * 1e6
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return lat[min(n-1, int(math.Ceil(p*float64(n)))-1)] }
	all, err := s.x.exchange([]float64{pct(0.50), pct(0.99)})
	if err != nil {
		return err
	}
	for _, v := range all {
		m.P50Us, m.P99Us = max(m.P50Us, v[0]), max(m.P99Us, v[1])
	}
	m.Samples = n
	return nil
}

// memcpy times a local copy of bytes between the same buffers, all ranks at
// once, and returns seconds per copy (maximum over ranks). adapt picks the
// iteration count from one timed copy, like the collectives.
func (s *sweep) memcpy(bytes int64, iters int, adapt bool) (float64, error) {
	dst, src := sub(s.out, 0, bytes), sub(s.in, 0, bytes)
	f := func() error { return s.t.Memcpy(dst, src) }
	if adapt {
		one, err := s.timed(0, 1, f)
		if err != nil {
			return 0, err
		}
		iters, _ = s.cfg.iterations(time.Duration(one * 1e9))
	}
	return s.timed(min(1, iters), max(1, iters), f)
}

// timed runs f warmup times, then iters times between barriers, and
// returns the maximum over ranks of the per-iteration seconds.
func (s *sweep) timed(warmup, iters int, f func() error) (float64, error) {
	return s.timedSync(warmup, iters, f, s.t.Sync)
}

// timedSync is timed with sync as the wait for f's work.
func (s *sweep) timedSync(warmup, iters int, f, sync func() error) (float64, error) {
	t := s.t
	for i := 0; i < warmup; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := sync(); err != nil {
		return 0, err
	}
	if err := t.Barrier(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	for i := 0; i < iters; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := sync(); err != nil {
		return 0, err
	}
	per := time.Since(t0).Seconds() / float64(iters)
	all, err := s.x.exchange([]float64{per, 0})
	if err != nil {
		return 0, err
	}
	var slowest float64
	for _, v := range all {
		slowest = max(slowest, v[0])
	}
	return slowest, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
