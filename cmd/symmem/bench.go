package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/bench/worldtarget"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/launch"
)

func init() { commands["bench"] = benchCmd }

// benchFlags are the parsed and validated flags of `symmem bench`.
type benchFlags struct {
	n        int
	backend  string
	cfg      bench.Config
	json     string
	plot     string
	progress bool
	profile  string
	timeout  time.Duration
}

var validAlgos = []coll.Algo{coll.AlgoAuto, coll.AlgoDirect, coll.AlgoNCCL, coll.AlgoNCCLWindow, coll.AlgoCE, coll.AlgoKernel}

func parseBenchFlags(args []string, stderr io.Writer) (*benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &benchFlags{}
	fs.IntVar(&f.n, "n", 2, "ranks to start when not already inside a launched job (RANK unset)")
	fs.StringVar(&f.backend, "backend", "auto", "backend: auto, cpu or cuda")
	ops := fs.String("ops", "all", "comma-separated ops: all_gather, reduce_scatter, all_reduce, broadcast (or all)")
	b := fs.String("b", "1K", "smallest size: bytes of the full tensor (K, M, G suffixes)")
	e := fs.String("e", "256M", "largest size")
	fact := fs.Int("f", 2, "size multiplication factor between steps")
	dtype := fs.String("dtype", "float32", "element type: float32, float64, bfloat16, float16, int32, int64, int8, uint8")
	redop := fs.String("op", "sum", "reduction for reduce_scatter and all_reduce: sum, avg, min, max")
	root := fs.Int("root", 0, "broadcast root")
	algos := fs.String("algo", "auto", "comma-separated algorithms: auto, direct, nccl, nccl-window, ce, kernel")
	inplace := fs.String("inplace", "both", "placements to measure: both, no (out-of-place only), only (in-place only)")
	plain := fs.Bool("plain", false, "use ordinary Go memory (the staged path) instead of symmetric buffers")
	fs.BoolVar(&f.cfg.Check, "check", true, "check every size against a serial reference (#wrong)")
	fs.IntVar(&f.cfg.Iters, "iters", 1000, "timed iterations per size (the maximum when -budget > 0: small sizes need many to amortise the final synchronisation)")
	fs.IntVar(&f.cfg.Warmup, "warmup", 5, "untimed warmup iterations per size")
	fs.DurationVar(&f.cfg.Budget, "budget", 200*time.Millisecond, "adaptive iterations: about this much timed work per size (0: always -iters)")
	fs.IntVar(&f.cfg.Rounds, "rounds", 1, "measure each size this many times (memcpy before and after each), keep the fastest")
	seed := fs.Uint64("seed", 1, "seed of the random test data")
	fs.StringVar(&f.json, "json", "", "write the results as JSON to this file")
	fs.StringVar(&f.plot, "plot", "", "write a busbw-vs-size plot to this file (.svg or .png)")
	fs.BoolVar(&f.progress, "progress", false, "print a line per size to stderr (default: when stderr is a terminal)")
	fs.StringVar(&f.profile, "cpuprofile", "", "write each rank's CPU profile to FILE.rankN")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "bound on every wait inside a collective")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: symmem bench [flags]

Sweeps collectives over sizes like nccl-tests and prints size, count, type, redop,
root, time, algbw, busbw and #wrong for out-of-place and in-place calls, with the
memcpy bandwidth of the same bytes measured in the same run. Outside a launched job
it starts -n local ranks of itself.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only; see symmem bench -h)", fs.Arg(0))
	}
	c := &f.cfg
	c.Seed, c.Root, c.Plain = *seed, *root, *plain
	var err error
	if c.Ops, err = parseOps(*ops); err != nil {
		return nil, err
	}
	if c.Algos, err = parseAlgos(*algos); err != nil {
		return nil, err
	}
	if c.DType, err = coll.ParseDType(*dtype); err != nil {
		return nil, fmt.Errorf("-dtype: %w", err)
	}
	if c.RedOp, err = coll.ParseReduceOp(*redop); err != nil {
		return nil, fmt.Errorf("-op: %w", err)
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
		return nil, fmt.Errorf("-inplace %q: want both, no or only", *inplace)
	}
	switch strings.ToLower(f.backend) {
	case "auto", "cpu", "cuda":
	default:
		return nil, fmt.Errorf("-backend %q: want auto, cpu or cuda", f.backend)
	}
	if f.n < 1 {
		return nil, fmt.Errorf("-n %d: need at least 1 rank", f.n)
	}
	if f.plot != "" && !strings.HasSuffix(strings.ToLower(f.plot), ".svg") && !strings.HasSuffix(strings.ToLower(f.plot), ".png") {
		return nil, fmt.Errorf("-plot %q: want a file name ending in .svg or .png", f.plot)
	}
	if err := c.Validate(max(f.n, c.Root+1)); err != nil {
		return nil, err
	}
	if c.Root >= f.n && os.Getenv("RANK") == "" {
		return nil, fmt.Errorf("-root %d: outside the %d ranks (-n)", c.Root, f.n)
	}
	return f, nil
}

func parseOps(s string) ([]coll.Kind, error) {
	if strings.EqualFold(s, "all") {
		return []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast}, nil
	}
	var out []coll.Kind
	for _, p := range strings.Split(s, ",") {
		k, err := coll.ParseKind(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("-ops: %w (or all)", err)
		}
		out = append(out, k)
	}
	return out, nil
}

func parseAlgos(s string) ([]coll.Algo, error) {
	var out []coll.Algo
	for _, p := range strings.Split(s, ",") {
		a := coll.Algo(strings.ToLower(strings.TrimSpace(p)))
		ok := false
		for _, v := range validAlgos {
			ok = ok || a == v
		}
		if !ok {
			return nil, fmt.Errorf("-algo: unknown algorithm %q (want auto, direct, nccl, nccl-window, ce or kernel)", p)
		}
		out = append(out, a)
	}
	return out, nil
}

func benchCmd(args []string) int {
	f, err := parseBenchFlags(args, os.Stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "symmem bench: %v\n", err)
		return 2
	}
	if resolveBackend(f.backend) == "cpu" {
		for _, a := range f.cfg.Algos {
			if a != coll.AlgoAuto && a != coll.AlgoDirect {
				fmt.Fprintf(os.Stderr, "symmem bench: -algo %s: not available on the cpu backend (valid: auto, direct; nccl, nccl-window, ce and kernel need -backend cuda)\n", a)
				return 2
			}
		}
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
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
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
	t, closeTarget, err := openTarget(ctx, f.backend, f.timeout)
	if err != nil {
		return err
	}
	defer closeTarget()
	cfg := f.cfg
	if t.Rank() == 0 && (f.progress || os.Getenv("SYMMEM_BENCH_TTY") == "1" || isTerminal(os.Stderr)) {
		cfg.Progress = os.Stderr
	}
	rep, err := bench.Run(t, cfg)
	if err != nil {
		return err
	}
	if t.Rank() != 0 {
		return nil
	}
	rep.Command = strings.TrimSpace("symmem bench " + strings.Join(args, " "))
	rep.Host = hostInfo()
	if err := bench.WriteTable(os.Stdout, rep); err != nil {
		return err
	}
	if f.json != "" {
		fh, err := os.Create(f.json)
		if err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		err = bench.WriteJSON(fh, rep)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-json %s: %w", f.json, err)
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
func openTarget(ctx context.Context, backend string, timeout time.Duration) (bench.Target, func() error, error) {
	w, err := symmem.Init(ctx, symmem.Options{Backend: backend, Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	t, err := worldtarget.New(ctx, w)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	return t, func() error {
		t.Close()
		return w.Close()
	}, nil
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
