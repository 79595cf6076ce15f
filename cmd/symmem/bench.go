package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/bench/worldtarget"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/launch"
)

// benchFlags are the parsed and validated flags of `symmem bench`.
type benchFlags struct {
	n        int // ranks (--nproc-per-node)
	backend  string
	cfg      bench.Config
	json     string
	plot     string
	progress bool
	profile  string
	timeout  time.Duration
	lcCTAs   int // --lc-ctas: symmem.Options.GPU.LowContentionCTAs
}

// benchOpts holds the raw flag values of `symmem bench`; finish checks them.
type benchOpts struct {
	f                                             benchFlags
	ops, b, e, dtype, redop, algos, inplace, json string
	fact, root, check                             int
	plain                                         bool
	seed                                          uint64
}

// define declares the flags: nccl-tests' letters as shorthands of the long
// names.
func (o *benchOpts) define(fs *pflag.FlagSet) {
	f := &o.f
	fs.SetNormalizeFunc(normalizeFlag)
	fs.IntVar(&f.n, "nproc-per-node", 2, "ranks to start when not already inside a launched job (RANK unset), as torchrun spells it")
	fs.StringVar(&f.backend, "backend", "auto", "backend: auto, cpu or cuda")
	fs.StringVar(&o.ops, "ops", "all", "comma-separated ops: all_gather, reduce_scatter, all_reduce, broadcast, all_to_all (or all)")
	fs.StringVarP(&o.b, "minbytes", "b", "1K", "smallest size: bytes of the full tensor (K, M, G suffixes)")
	fs.StringVarP(&o.e, "maxbytes", "e", "256M", "largest size")
	fs.IntVarP(&o.fact, "stepfactor", "f", 2, "size multiplication factor between steps")
	fs.StringVarP(&o.dtype, "dtype", "d", "float", "element type: float (float32), half (float16), bfloat16, double (float64), int32, int64, int8, uint8")
	fs.StringVarP(&o.redop, "op", "o", "sum", "reduction for reduce_scatter and all_reduce: sum, avg, min, max")
	fs.IntVarP(&o.root, "root", "r", 0, "broadcast root")
	fs.StringVar(&o.algos, "algo", "auto", "comma-separated algorithms: "+joinAlgos(coll.Algos()))
	fs.StringVar(&o.inplace, "inplace", "both", "placements to measure: both, no (out-of-place only), only (in-place only)")
	fs.BoolVar(&o.plain, "plain", false, "use ordinary Go memory (the staged path) instead of symmetric buffers")
	fs.Int64Var(&f.cfg.Offset, "offset", 0, "start the input and output this many bytes past their allocations (a multiple of the element size): buffers off 16-byte alignment")
	fs.IntVarP(&o.check, "check", "c", 1, "check every size against a serial reference (#wrong): 1 on, 0 off")
	fs.IntVarP(&f.cfg.Iters, "iters", "n", 1000, "timed iterations per size (the maximum when --budget > 0: small sizes need many to amortise the final synchronisation)")
	fs.IntVarP(&f.cfg.Warmup, "warmup", "w", 5, "untimed warmup iterations per size")
	fs.DurationVar(&f.cfg.Budget, "budget", 200*time.Millisecond, "adaptive iterations: about this much timed work per size (0: always -n)")
	fs.IntVar(&f.cfg.Rounds, "rounds", 1, "measure each size this many times (memcpy before and after each), keep the fastest; the first round checks (-c), the others only time")
	fs.IntVarP(&f.cfg.Graph, "cudagraph", "G", 0, "time CUDA-graph replays: each replay launches a graph of this many captured calls (cuda backend); 0: eager calls")
	fs.IntVar(&f.cfg.Samples, "samples", 100, "per size, also time up to this many calls one by one (each synchronised) for p50/p99 latencies in the JSON; 0: off")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random test data")
	fs.StringVarP(&o.json, "json", "J", "", "write the results as JSON to this file")
	fs.StringVar(&f.plot, "plot", "", "write plots (busbw and latency vs size) to this file (.svg or .png)")
	fs.BoolVar(&f.progress, "progress", false, "print a line per size to stderr (default: when stderr is a terminal)")
	fs.StringVar(&f.profile, "cpuprofile", "", "write each rank's CPU profile to FILE.rankN")
	fs.DurationVar(&f.timeout, "timeout", symmem.DefaultTimeout, "bound on every wait inside a collective")
	fs.IntVar(&f.lcCTAs, "lc-ctas", 0, "CTAs of the GPU lc path's reduction kernel (symmem.Options.GPU.LowContentionCTAs; 0: its default, 8)")
}

const benchLong = `Sweeps collectives over sizes like nccl-tests and prints its rows (size, count, type,
redop, root, time, algbw, busbw and #wrong, out-of-place and in-place) as each size
completes, with the path taken and the memcpy bandwidth of the same bytes on a "#"
line under each row. Flags follow nccl-tests (-b -e -f, -n iterations, -w warmup,
-c check, -d datatype, -o op, -r root, -G graph, -J json). Outside a launched job it starts
--nproc-per-node local ranks of itself.`

// finish checks the flag values and fills in the sweep's Config.
func (o *benchOpts) finish() (*benchFlags, error) {
	f := &o.f
	ops, b, e, dtype, redop, algos, inplace := &o.ops, &o.b, &o.e, o.dtype, o.redop, &o.algos, &o.inplace
	fact, root, check, plain, seed, jsonPath := &o.fact, o.root, o.check, &o.plain, &o.seed, o.json
	c := &f.cfg
	c.Seed, c.Root, c.Plain, f.json = *seed, root, *plain, jsonPath
	switch check {
	case 0, 1:
		c.Check = check == 1
	default:
		return nil, fmt.Errorf("-c %d: want 1 (check) or 0 (no check)", check)
	}
	var err error
	if c.Ops, err = parseOps(*ops); err != nil {
		return nil, err
	}
	if c.Algos, err = parseAlgos(*algos); err != nil {
		return nil, err
	}
	if c.DType, err = coll.ParseDType(dtype); err != nil {
		return nil, fmt.Errorf("-d: %w", err)
	}
	if err := bench.CheckOffset(c.Offset, c.DType); err != nil {
		return nil, err
	}
	if c.RedOp, err = coll.ParseReduceOp(redop); err != nil {
		return nil, fmt.Errorf("--op: %w", err)
	}
	lo, err := bench.ParseSize(*b)
	if err != nil {
		return nil, fmt.Errorf("-b: %w", err)
	}
	hi, err := bench.ParseSize(*e)
	if err != nil {
		return nil, fmt.Errorf("-e: %w", err)
	}
	if c.Sizes, err = bench.Sizes(lo, hi, *fact); err != nil {
		return nil, err
	}
	switch strings.ToLower(*inplace) {
	case "both":
		c.OutOfPlace, c.InPlace = true, true
	case "no", "false", "0", "out":
		c.OutOfPlace = true
	case "only", "true", "1", "in":
		c.InPlace = true
	default:
		return nil, fmt.Errorf("--inplace %q: want both, no or only", *inplace)
	}
	switch strings.ToLower(f.backend) {
	case "auto", "cpu", "cuda":
	default:
		return nil, fmt.Errorf("--backend %q: want auto, cpu or cuda", f.backend)
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: must be positive (it bounds every wait)", f.timeout)
	}
	if err := checkRanks(f.n); err != nil {
		return nil, err
	}
	if c.Rounds < 1 {
		return nil, fmt.Errorf("--rounds %d: need at least 1", c.Rounds)
	}
	if c.Budget < 0 {
		return nil, fmt.Errorf("--budget %v: must not be negative (0 means always -n iterations)", c.Budget)
	}
	ranks, ranksFrom := f.n, "--nproc-per-node"
	if w, err := strconv.Atoi(os.Getenv("WORLD_SIZE")); err == nil && os.Getenv("RANK") != "" {
		ranks, ranksFrom = w, "WORLD_SIZE"
	}
	if min := int64(c.DType.Size() * max(1, ranks)); c.Sizes[0] < min {
		return nil, fmt.Errorf("-b %d: below %d bytes (one %s element per rank for %d ranks), a size would round down to zero elements", c.Sizes[0], min, bench.TypeName(c.DType), ranks)
	}
	if f.json != "" {
		if err := checkWritable(f.json); err != nil {
			return nil, fmt.Errorf("-J %s: %w", f.json, err)
		}
	}
	if f.plot != "" && !strings.HasSuffix(strings.ToLower(f.plot), ".svg") && !strings.HasSuffix(strings.ToLower(f.plot), ".png") {
		return nil, fmt.Errorf("--plot %q: want a file name ending in .svg or .png", f.plot)
	}
	if f.plot != "" {
		if err := checkWritable(f.plot); err != nil {
			return nil, fmt.Errorf("--plot %s: %w", f.plot, err)
		}
	}
	if err := (symmem.Options{GPU: symmem.GPUOptions{LowContentionCTAs: f.lcCTAs}}).Validate(); err != nil {
		return nil, fmt.Errorf("--lc-ctas %d: %w", f.lcCTAs, err)
	}
	if err := c.Validate(max(f.n, c.Root+1)); err != nil {
		return nil, err
	}
	if c.Root >= ranks {
		return nil, fmt.Errorf("-r: root %d is outside the %d ranks (%s)", c.Root, ranks, ranksFrom)
	}
	return f, nil
}

// checkWritable fails now, before any work, when path cannot be written:
// it creates the file if missing (and removes it again) or opens it for
// appending.
func checkWritable(path string) error {
	_, statErr := os.Stat(path)
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write the results file: %w", err)
	}
	fh.Close()
	if os.IsNotExist(statErr) {
		os.Remove(path)
	}
	return nil
}

func parseOps(s string) ([]coll.Kind, error) {
	if strings.EqualFold(s, "all") {
		return coll.Kinds(), nil
	}
	var out []coll.Kind
	for _, p := range strings.Split(s, ",") {
		k, err := coll.ParseKind(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("--ops: %w (or all)", err)
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("--ops: %v listed twice (%q): each op runs once", k, s)
		}
		out = append(out, k)
	}
	return out, nil
}

// joinAlgos is as, comma-separated.
func joinAlgos(as []coll.Algo) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// parseAlgos reads --algo: algorithms coll knows, each once.
func parseAlgos(s string) ([]coll.Algo, error) {
	out, err := splitAlgos(s)
	if err != nil {
		return nil, err
	}
	for _, a := range out {
		if !slices.Contains(coll.Algos(), a) {
			return nil, fmt.Errorf("--algo: unknown algorithm %q (want one of %v)", a, coll.Algos())
		}
	}
	return out, nil
}

// splitAlgos reads --algo's spelling only: names, none empty, each once.
func splitAlgos(s string) ([]coll.Algo, error) {
	var out []coll.Algo
	for _, p := range strings.Split(s, ",") {
		a := coll.Algo(strings.ToLower(strings.TrimSpace(p)))
		if a == "" {
			return nil, fmt.Errorf("--algo %q: empty algorithm name", s)
		}
		if slices.Contains(out, a) {
			return nil, fmt.Errorf("--algo: %s listed twice (%q): each algorithm runs once", a, s)
		}
		out = append(out, a)
	}
	return out, nil
}

// checkCPUAlgos refuses, before any rank starts, the algorithms the cpu
// backend lacks (it has auto and direct) where backend resolves to it.
func checkCPUAlgos(backend string, algos []coll.Algo) error {
	if resolveBackend(backend) != "cpu" {
		return nil
	}
	for _, a := range algos {
		if a != coll.AlgoAuto && a != coll.AlgoDirect {
			return fmt.Errorf("--algo %s: not available on the cpu backend (valid: auto, direct; the GPU paths need --backend cuda)", a)
		}
	}
	return nil
}

// checkBenchCPUAlgos refuses, before any rank starts, a list of algorithms
// none of which the cpu backend has where backend resolves to it: nothing
// would run. Where some run, the sweep skips the others with a line saying
// why (bench.Report.Skipped), so one list serves both backends.
func checkBenchCPUAlgos(backend string, algos []coll.Algo) error {
	if resolveBackend(backend) != "cpu" {
		return nil
	}
	var gpu []string
	for _, a := range algos {
		if a != coll.AlgoAuto && a != coll.AlgoDirect {
			gpu = append(gpu, string(a))
		}
	}
	if len(gpu) > 0 && len(gpu) == len(algos) {
		return fmt.Errorf("--algo %s: not available on the cpu backend (valid: auto, direct; the GPU paths need --backend cuda)", strings.Join(gpu, ","))
	}
	return nil
}

func newBenchCmd() *cobra.Command {
	o := &benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "benchmark collectives, nccl-tests output (CPU backend when no GPU)",
		Long:  benchLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.finish()
			if err != nil {
				return err
			}
			return exitWith(benchCmd(f, subArgs()))
		},
	}
	o.define(cmd.Flags())
	cmd.AddCommand(newOverlapCmd())
	return cmd
}

// benchCmd runs a checked bench: it starts the ranks, or is one.
func benchCmd(f *benchFlags, args []string) int {
	if err := checkBenchCPUAlgos(f.backend, f.cfg.Algos); err != nil {
		fmt.Fprintf(os.Stderr, "symmem bench: %v\n", err)
		return 2
	}
	if f.cfg.Graph > 0 && resolveBackend(f.backend) != "cuda" {
		fmt.Fprintf(os.Stderr, "symmem bench: -G %d: CUDA graphs need the cuda backend (this run uses %s)\n", f.cfg.Graph, resolveBackend(f.backend))
		return 2
	}
	if os.Getenv("RANK") == "" {
		return selfLaunch("bench", f.n, args)
	}
	if err := benchRank(f, args); err != nil {
		fmt.Fprintf(os.Stderr, "symmem bench (rank %s): %v\n", os.Getenv("RANK"), err)
		return 1
	}
	return 0
}

// selfLaunch re-runs this binary's subcommand with n local ranks.
func selfLaunch(cmd string, n int, args []string) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	var env []string
	if isTerminal(os.Stderr) {
		env = append(env, "SYMMEM_BENCH_TTY=1")
	}
	code, err := launch.Run(context.Background(), launch.Config{
		N: n, Prog: os.Args[0], Args: append([]string{cmd}, args...), Env: env, NoPrefix: true, Signals: sigs,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "symmem %s: %v\n", cmd, err)
	}
	return code
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func benchRank(f *benchFlags, args []string) error {
	if f.profile != "" {
		fh, err := os.Create(fmt.Sprintf("%s.rank%s", f.profile, os.Getenv("RANK")))
		if err != nil {
			return err
		}
		defer fh.Close()
		if err := pprof.StartCPUProfile(fh); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	t, w, closeTarget, err := openTarget(ctx, symmem.Options{Backend: f.backend, Timeout: f.timeout, GPU: symmem.GPUOptions{LowContentionCTAs: f.lcCTAs}})
	if err != nil {
		return err
	}
	defer closeTarget()
	about := runAbout{command: strings.TrimSpace("symmem bench " + strings.Join(args, " ")), host: hostInfo(), machine: benchMachine(w),
		args: append([]string{"bench"}, args...)}
	rep, err := sweep(t, f.cfg, f.progress, about)
	if err != nil || t.Rank() != 0 {
		return err
	}
	if f.json != "" {
		if err := writeJSONFile(f.json, func(w io.Writer) error { return bench.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	if f.plot != "" {
		if err := bench.WritePlot(f.plot, rep); err != nil {
			return err
		}
	}
	if n := rep.WrongTotal(); n != 0 {
		return fmt.Errorf("%d wrong elements (see #wrong)", n)
	}
	return nil
}

// runAbout describes a run in its reports: the command line, the host, the
// GPU machine (nil without one) and the arguments.
type runAbout struct {
	command, host string
	machine       *bench.Machine
	args          []string
}

// sweep is one bench.Run of cfg on t, its rows printed to stdout as each
// size completes (progress on stderr where asked or a terminal), the
// table closed on rank 0; the report carries about (bench and tune).
func sweep(t bench.Target, cfg bench.Config, progress bool, about runAbout) (*bench.Report, error) {
	if t.Rank() == 0 && (progress || os.Getenv("SYMMEM_BENCH_TTY") == "1" || isTerminal(os.Stderr)) {
		cfg.Progress = os.Stderr
	}
	table := bench.NewTable(os.Stdout)
	describe := func(rep *bench.Report) {
		rep.Command, rep.Host, rep.Machine, rep.Version, rep.Args = about.command, about.host, about.machine, versionString(), about.args
	}
	cfg.OnRow = func(rep *bench.Report, res bench.Result) error {
		describe(rep)
		return table.Row(rep, res)
	}
	rep, err := bench.Run(t, cfg)
	if err != nil || t.Rank() != 0 {
		return rep, err
	}
	describe(rep)
	return rep, table.Close(rep)
}

// writeJSONFile writes the -J file through write (both bench modes).
func writeJSONFile(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-J/--json: %w", err)
	}
	err = write(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-J/--json %s: %w", path, err)
	}
	return nil
}

// resolveBackend is the backend Init will start for the -backend flag
// (symmem.ResolveBackend: one rule for the CLI and the library).
func resolveBackend(backend string) string {
	kind, _, err := symmem.ResolveBackend(backend)
	if err != nil {
		return backend
	}
	return kind
}

// openTarget joins the job through the user API on the chosen backend
// (collective over the ranks).
func openTarget(ctx context.Context, o symmem.Options) (bench.Target, *symmem.World, func() error, error) {
	w, err := symmem.Init(ctx, o)
	if err != nil {
		return nil, nil, nil, err
	}
	t, err := worldtarget.New(ctx, w)
	if err != nil {
		w.Close()
		return nil, nil, nil, err
	}
	return t, w, func() error {
		t.Close()
		return w.Close()
	}, nil
}

// benchMachine is the GPU machine w runs on, for the report (nil without
// a GPU).
func benchMachine(w *symmem.World) *bench.Machine {
	m := w.Doctor().Machine
	if m.GPU == "" {
		return nil
	}
	return &bench.Machine{GPU: m.GPU, Count: m.Count, Link: m.Link, Driver: m.Driver, NCCL: m.NCCL}
}

// hostInfo describes the machine: CPU count and model, Go version.
func hostInfo() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
