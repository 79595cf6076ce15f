package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/tune"
	"github.com/symmem/symmem/rendezvous"
)

// tuneOpts are the flags of `symmem tune`: a subset of bench's, plus the
// dtypes (one per class) and the output.
type tuneOpts struct {
	b        benchOpts
	dtypes   string
	out      string
	algos    string
	graph    int
	graphMax string
}

func (o *tuneOpts) define(fs *pflag.FlagSet) {
	b, f := &o.b, &o.b.f
	fs.SetNormalizeFunc(normalizeFlag)
	fs.IntVar(&f.n, "nproc-per-node", 2, "ranks to start when not already inside a launched job (RANK unset)")
	fs.StringVar(&f.backend, "backend", "auto", "backend: auto, cpu or cuda")
	fs.StringVarP(&o.out, "out", "o", "", "write the table to this file (required); the bench reports go beside it as FILE.DTYPE.bench.json (FILE without .json)")
	fs.StringVar(&b.ops, "ops", "all", "comma-separated ops: all_gather, reduce_scatter, all_reduce, broadcast, all_to_all (or all)")
	fs.StringVar(&o.dtypes, "dtypes", "bfloat16,float,int32", "one element type per dtype class the table distinguishes: 16-bit float (bfloat16 or half), 32-bit float (float), other (double, the integers)")
	fs.IntVarP(&o.graph, "cudagraph", "G", 0, "also time CUDA-graph replays of this many captured calls per path, up to --graph-max: the table's graph rows, which auto reads for captured calls (cuda backend); 0: eager calls only")
	fs.StringVar(&o.graphMax, "graph-max", "16M", "with -G: the largest size replayed (above it captured calls take the eager rows)")
	fs.StringVar(&o.algos, "algo", "", "comma-separated algorithms to measure, where the backend has them for an op, at least one besides auto (default: every algorithm it declares per op, and auto for auto/best)")
	fs.StringVarP(&b.b, "minbytes", "b", "1K", "smallest size: bytes of the full tensor (K, M, G suffixes)")
	fs.StringVarP(&b.e, "maxbytes", "e", "1G", "largest size")
	fs.IntVarP(&b.fact, "stepfactor", "f", 2, "size multiplication factor between steps")
	fs.StringVar(&b.redop, "op", "sum", "reduction for reduce_scatter and all_reduce")
	fs.StringVar(&b.inplace, "inplace", "both", "placements to measure: both, no (out-of-place only), only (in-place only)")
	fs.IntVarP(&b.check, "check", "c", 1, "check every size against a serial reference (a path with wrong elements never wins): 1 on, 0 off")
	fs.IntVarP(&f.cfg.Iters, "iters", "n", 1000, "timed iterations per size (the maximum: --budget)")
	fs.IntVarP(&f.cfg.Warmup, "warmup", "w", 5, "untimed warmup iterations per size")
	fs.DurationVar(&f.cfg.Budget, "budget", 100*time.Millisecond, "adaptive iterations: about this much timed work per size and path")
	fs.IntVar(&f.cfg.Rounds, "rounds", 1, "measure each size this many times, keep the fastest; the first round checks (-c), the others only time")
	fs.Uint64Var(&b.seed, "seed", 1, "seed of the random test data")
	fs.BoolVar(&f.progress, "progress", false, "print a line per size to stderr (default: when stderr is a terminal)")
	fs.DurationVar(&f.timeout, "timeout", symmem.DefaultTimeout, "bound on every wait inside a collective")
}

// tuneFlags are the checked flags.
type tuneFlags struct {
	benchFlags
	dtypes     []coll.DType
	algos      []coll.Algo // nil: every declared algorithm, and auto
	out        string
	graph      int     // calls per captured graph (-G); 0: eager only
	graphSizes []int64 // the sizes replayed: the sweep's up to --graph-max
}

// finish checks the flags (through bench's checks for the shared ones).
func (o *tuneOpts) finish() (*tuneFlags, error) {
	if o.out == "" {
		return nil, fmt.Errorf("-o/--out: name the table file to write")
	}
	t := &tuneFlags{out: o.out}
	classes := map[tune.Class]coll.DType{}
	for _, s := range strings.Split(o.dtypes, ",") {
		dt, err := coll.ParseDType(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--dtypes: %w", err)
		}
		c := tune.ClassOf(dt)
		if prev, ok := classes[c]; ok {
			return nil, fmt.Errorf("--dtypes: %s and %s are both %s: the table has one row set per class", bench.TypeName(prev), bench.TypeName(dt), c)
		}
		classes[c] = dt
		t.dtypes = append(t.dtypes, dt)
	}
	if o.algos != "" {
		var err error
		if t.algos, err = parseAlgos(o.algos); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(t.algos, func(a coll.Algo) bool { return a != coll.AlgoAuto }) {
			return nil, fmt.Errorf("--algo %s: name a path to measure besides auto (auto is what the table chooses for), e.g. --algo direct; without --algo every path is measured", o.algos)
		}
	}
	// bench's checks: sizes, placements, backend, ranks; the dtype with
	// the largest elements bounds the smallest size.
	b := o.b
	b.algos, b.dtype = "auto", slices.MaxFunc(t.dtypes, func(a, c coll.DType) int { return a.Size() - c.Size() }).String()
	f, err := b.finish()
	if err != nil {
		return nil, err
	}
	t.benchFlags = *f
	if err := checkCPUAlgos(f.backend, t.algos); err != nil {
		return nil, err
	}
	// Checked without -G too: a bad value is refused, not ignored.
	hi, err := bench.ParseSize(o.graphMax)
	if err != nil {
		return nil, fmt.Errorf("--graph-max: %w", err)
	}
	switch {
	case o.graph < 0:
		return nil, fmt.Errorf("-G/--cudagraph %d must not be negative", o.graph)
	case o.graph > 0 && resolveBackend(f.backend) != "cuda":
		return nil, fmt.Errorf("-G %d: CUDA graphs need the cuda backend (this run uses %s)", o.graph, resolveBackend(f.backend))
	case o.graph > 0:
		for _, sz := range f.cfg.Sizes {
			if sz <= hi {
				t.graphSizes = append(t.graphSizes, sz)
			}
		}
		if len(t.graphSizes) == 0 {
			return nil, fmt.Errorf("--graph-max %s: below the smallest size -b %d: no size would be replayed", o.graphMax, f.cfg.Sizes[0])
		}
		t.graph = o.graph
	}
	if err := checkWritable(t.out); err != nil {
		return nil, fmt.Errorf("-o %s: %w", t.out, err)
	}
	return t, nil
}

// reportPath is where the bench report of dt goes: beside the table
// (FILE.DTYPE.bench.json; graph replays FILE.DTYPE.graph.bench.json).
func (t *tuneFlags) reportPath(dt coll.DType, graph bool) string {
	mode := ""
	if graph {
		mode = ".graph"
	}
	return strings.TrimSuffix(t.out, ".json") + "." + bench.TypeName(dt) + mode + ".bench.json"
}

var tuneLong = `Measures every path the backend declares per op (and auto, for auto/best), per dtype
class (--dtypes: one type each for 16-bit floats, 32-bit floats and the rest), at sizes
-b to -e and both placements, on the ranks at hand, and writes the table auto reads
(-o FILE; point Options.GPU.AutoTable or SYMMEM_AUTO_TABLE at it) with the bench
reports beside it (FILE.DTYPE.bench.json, inputs of go generate for the built-in
table: docs/gpu.md). Every path is measured at one size before the next size, each round
taking every path in turn (rows print as bench prints them, at the end of each op). Per op, class, rank count,
placement and size the fastest path wins; among paths within 3% of it the previous size's
winner stays, else the order ` + joinAlgos(tune.Preference) + ` decides; refused
or wrong calls never win; all-gather and broadcast, which move bytes, measured on one
type stand for every class. With -G N it also times CUDA-graph replays (N captured
calls a graph) up to --graph-max and writes them as the table's graph rows
(FILE.DTYPE.graph.bench.json beside it): auto reads those for calls captured into a
graph, where launch and host costs vanish and the paths rank differently at small
sizes. Outside a launched
job it starts --nproc-per-node local ranks of itself.`

func newTuneCmd() *cobra.Command {
	o := &tuneOpts{}
	cmd := &cobra.Command{
		Use:   "tune -o FILE [flags]",
		Short: "measure every path and write the table auto reads",
		Long:  tuneLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.finish()
			if err != nil {
				return err
			}
			return exitWith(tuneCmd(f, subArgs()))
		},
	}
	o.define(cmd.Flags())
	return cmd
}

// tuneCmd runs a checked tune: it starts the ranks, or is one.
func tuneCmd(f *tuneFlags, args []string) int {
	if os.Getenv("RANK") == "" {
		return selfLaunch("tune", f.n, args)
	}
	if err := tuneRank(f, args); err != nil {
		fmt.Fprintf(os.Stderr, "symmem tune (rank %s): %v\n", os.Getenv("RANK"), err)
		return 1
	}
	return 0
}

// tuneAlgos are the algorithms measured for k: auto and every one the
// backend declares, or those of want it declares; none where that leaves
// only auto (no path for the table to choose).
func tuneAlgos(w *symmem.World, k coll.Kind, want []coll.Algo) []coll.Algo {
	if want == nil {
		return append([]coll.Algo{coll.AlgoAuto}, w.Algos(k)...)
	}
	var out []coll.Algo
	for _, a := range want {
		if w.Supports(k, a) {
			out = append(out, a)
		}
	}
	if !slices.ContainsFunc(out, func(a coll.Algo) bool { return a != coll.AlgoAuto }) {
		return nil
	}
	return out
}

func tuneRank(f *tuneFlags, args []string) error {
	ctx := context.Background()
	// auto is measured with its built-in table: a table named by
	// SYMMEM_AUTO_TABLE would make the auto rows measure it, and one from
	// another machine would stop Init, the very thing tune is run to fix.
	env, err := rendezvous.EnvFromOS()
	if err != nil {
		return err
	}
	env.AutoTable = ""
	t, w, closeTarget, err := openTarget(ctx, symmem.Options{Backend: f.backend, Timeout: f.timeout, Env: &env})
	if err != nil {
		return err
	}
	defer closeTarget()
	rank0 := t.Rank() == 0
	command := strings.TrimSpace("symmem tune " + strings.Join(args, " "))
	about := runAbout{command: command, host: hostInfo(), machine: benchMachine(w), args: append([]string{"tune"}, args...)}
	var inputs []tune.Input
	var sources []string
	var wrong int64
	for _, dt := range f.dtypes {
		for _, graph := range []bool{false, true} {
			if graph && f.graph == 0 {
				continue
			}
			rep, err := tuneSweeps(t, w, f, dt, graph, about)
			if err != nil {
				return err
			}
			if !rank0 || rep == nil {
				continue
			}
			wrong += rep.WrongTotal()
			var js bytes.Buffer
			if err := bench.WriteJSON(&js, rep); err != nil {
				return err
			}
			path := f.reportPath(dt, graph)
			if err := os.WriteFile(path, js.Bytes(), 0o644); err != nil {
				return fmt.Errorf("bench report beside the table: %w", err)
			}
			in, err := tune.ReadInput(filepath.Base(path), js.Bytes())
			if err != nil {
				return err
			}
			inputs, sources = append(inputs, in), append(sources, filepath.Base(path))
		}
	}
	if !rank0 {
		return nil
	}
	if len(inputs) == 0 { // every op skipped: --algo named none of the backend's paths
		var have []string
		for _, k := range f.cfg.Ops {
			have = append(have, fmt.Sprintf("%v: %v", k, w.Algos(k)))
		}
		paths := slices.DeleteFunc(slices.Clone(f.algos), func(a coll.Algo) bool { return a == coll.AlgoAuto })
		return fmt.Errorf("--algo %v: the %s backend has none of these paths for the ops asked (it has %s)", paths, w.Backend(), strings.Join(have, "; "))
	}
	tb, err := tune.NewTable(inputs, command, sources)
	if err != nil {
		return err
	}
	data, err := tb.JSON()
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.out, data, 0o644); err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	var b strings.Builder
	graphRows := ""
	if len(tb.GraphRows) > 0 {
		graphRows = fmt.Sprintf(" and %d for captured calls", len(tb.GraphRows))
	}
	fmt.Fprintf(&b, "# symmem tune: %d rows%s, measured on %s, written to %s (bench reports: %s)\n", len(tb.Rows), graphRows, tb.Machine, f.out, strings.Join(sources, ", "))
	for _, r := range tb.Rows {
		fmt.Fprintf(&b, "#   %s\n", r)
	}
	for _, r := range tb.GraphRows {
		fmt.Fprintf(&b, "#   captured: %s\n", r)
	}
	os.Stdout.WriteString(b.String())
	if wrong != 0 {
		return fmt.Errorf("%d wrong elements (the rows with #wrong > 0 name the paths and sizes): the table was written without those paths, but a path that returns wrong data is a bug: rerun that row with `symmem bench --algo PATH -b SIZE -e SIZE` to confirm, and report it with the bench output", wrong)
	}
	return nil
}

// tuneSweeps measures every op for dt, eager or as graph replays, and
// returns the ops' reports joined (rank 0; nil elsewhere, and where no
// op had a path to measure).
func tuneSweeps(t bench.Target, w *symmem.World, f *tuneFlags, dt coll.DType, graph bool, about runAbout) (*bench.Report, error) {
	var all *bench.Report
	for _, k := range f.cfg.Ops {
		cfg := f.cfg
		cfg.Ops, cfg.DType = []coll.Kind{k}, dt
		cfg.BySize = true   // every path at a size seconds apart: drift does not pick the winner
		cfg.NoMemcpy = true // the table does not use the memcpy baseline
		if graph {
			cfg.Graph, cfg.Sizes = f.graph, f.graphSizes
		}
		if cfg.Algos = tuneAlgos(w, k, f.algos); len(cfg.Algos) == 0 {
			continue
		}
		rep, err := sweep(t, cfg, f.progress, about)
		if err != nil {
			return nil, err
		}
		if t.Rank() != 0 {
			continue
		}
		if all == nil {
			all = rep
		} else {
			all.Results = append(all.Results, rep.Results...)
			all.Seconds += rep.Seconds
		}
	}
	return all, nil
}
