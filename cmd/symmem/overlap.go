package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
)

// overlapFlags are the parsed and validated flags of `symmem bench overlap`.
type overlapFlags struct {
	n        int
	backend  string
	timeout  time.Duration
	cfg      bench.OverlapConfig
	json     string
	progress bool
}

// overlapOpts holds the raw flag values; finish checks them.
type overlapOpts struct {
	f                                               overlapFlags
	ops, size, dtype, redop, algos, gemm, fsdpBytes string
	noFSDP                                          bool
}

func (o *overlapOpts) define(fs *pflag.FlagSet) {
	f, c := &o.f, &o.f.cfg
	fs.SetNormalizeFunc(normalizeFlag)
	fs.IntVar(&f.n, "nproc-per-node", 2, "ranks to start when not already inside a launched job (RANK unset)")
	fs.StringVar(&f.backend, "backend", "auto", "backend: auto or cuda (the GEMMs need a GPU)")
	fs.StringVar(&o.ops, "ops", "all_gather,reduce_scatter", "comma-separated collectives to overlap: all_gather, reduce_scatter, all_reduce")
	fs.StringVar(&o.size, "size", "1G", "bytes of one collective's full tensor (nccl-tests' size; K, M, G suffixes)")
	fs.StringVarP(&o.dtype, "dtype", "d", "bfloat16", "element type of the collectives")
	fs.StringVarP(&o.redop, "op", "o", "sum", "reduction for reduce_scatter and all_reduce: sum, avg, min, max")
	fs.IntVar(&c.Calls, "calls", 10, "collectives per trial, back to back on the communication stream")
	fs.StringVar(&o.gemm, "gemm", "8192", "GEMM shape: N (N×N×N) or MxNxK; bf16 inputs, f32 accumulation, through cuBLAS")
	fs.IntVar(&c.GEMMs, "gemms", 30, "GEMMs per trial, back to back on the compute stream")
	fs.StringVar(&o.algos, "algo", "", "comma-separated algorithms (default: auto and every algorithm the backend offers for the op)")
	fs.IntVarP(&c.Warmup, "warmup", "w", 1, "untimed trials before each measurement")
	fs.IntVar(&c.Reps, "reps", 5, "timed repetitions of each measurement; the median is reported")
	fs.BoolVar(&o.noFSDP, "no-fsdp", false, "skip the FSDP case (one all-gather beside one GEMM per iteration)")
	fs.StringVar(&o.fsdpBytes, "fsdp-size", "64M", "FSDP case: bytes each rank contributes to the all-gather")
	fs.IntVar(&c.FSDPIter, "fsdp-iters", 10, "FSDP case: iterations per trial")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the random test data")
	fs.StringVarP(&f.json, "json", "J", "", "write the results as JSON to this file")
	fs.BoolVar(&f.progress, "progress", false, "print a line per algorithm to stderr (default: when stderr is a terminal)")
	fs.DurationVar(&f.timeout, "timeout", 120*time.Second, "bound on every wait (a trial, a collective)")
}

const overlapLong = `Measures how much of a collective hides behind GEMMs running at the same time.
On every rank, bf16 GEMMs (cuBLAS, f32 accumulation) run on one stream and
collectives (through the user API) on another. For each algorithm the backend
offers (or --algo): the GEMMs alone, the collectives alone, both together from a
common device-side start (CUDA events), the hidden fraction
(gemm + comm - together) / comm and the GEMM slowdown (the GEMMs' end in the
together run / GEMMs alone - 1). Then the FSDP-shaped case of PyTorch #172714:
per iteration one all-gather (--fsdp-size per rank) beside one GEMM, sequential
vs overlapped. Every algorithm's result is checked once with fresh random data.
Needs a GPU (the cuda backend) and cuBLAS (found like NCCL; $SYMMEM_CUBLAS_LIB).`

// parseGEMM reads "N" or "MxNxK".
func parseGEMM(s string) (bench.GEMMShape, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(s)), "x")
	if len(parts) != 1 && len(parts) != 3 {
		return bench.GEMMShape{}, fmt.Errorf("--gemm %q: want N or MxNxK, e.g. 8192 or 4096x8192x2048", s)
	}
	var v [3]int
	for i := range v {
		p := parts[min(i, len(parts)-1)]
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 1<<20 {
			return bench.GEMMShape{}, fmt.Errorf("--gemm %q: %q is not a dimension from 1 to %d", s, p, 1<<20)
		}
		v[i] = n
	}
	return bench.GEMMShape{M: v[0], N: v[1], K: v[2]}, nil
}

func (o *overlapOpts) finish() (*overlapFlags, error) {
	f, c := &o.f, &o.f.cfg
	var err error
	if strings.EqualFold(strings.TrimSpace(o.ops), "all") {
		return nil, fmt.Errorf("--ops all: all includes broadcast, which the overlap benchmark lacks; name the ops, e.g. --ops all_gather,reduce_scatter,all_reduce")
	}
	if c.Ops, err = parseOps(o.ops); err != nil {
		return nil, err
	}
	if slices.Contains(c.Ops, coll.Broadcast) {
		return nil, fmt.Errorf("--ops %s: the overlap benchmark has no broadcast; want all_gather, reduce_scatter or all_reduce", o.ops)
	}
	if c.DType, err = coll.ParseDType(o.dtype); err != nil {
		return nil, fmt.Errorf("-d: %w", err)
	}
	if c.RedOp, err = coll.ParseReduceOp(o.redop); err != nil {
		return nil, fmt.Errorf("-o: %w", err)
	}
	if c.Bytes, err = bench.ParseSize(o.size); err != nil {
		return nil, fmt.Errorf("--size: %w", err)
	}
	if c.GEMM, err = parseGEMM(o.gemm); err != nil {
		return nil, err
	}
	c.FSDP = !o.noFSDP
	if c.FSDPRank, err = bench.ParseSize(o.fsdpBytes); err != nil {
		return nil, fmt.Errorf("--fsdp-size: %w", err)
	}
	// The all-gather moves whole elements: a remainder would be dropped
	// quietly.
	if es := int64(c.DType.Size()); c.FSDP && c.FSDPRank%es != 0 {
		return nil, fmt.Errorf("--fsdp-size %d: want a multiple of %s's %d-byte elements, e.g. %d", c.FSDPRank, bench.TypeName(c.DType), es, max(es, c.FSDPRank/es*es))
	}
	// Algorithm names are checked against the backend's own list on the
	// ranks (new paths need no change here); only the spelling is checked now.
	if strings.TrimSpace(o.algos) != "" {
		if c.Algos, err = splitAlgos(o.algos); err != nil {
			return nil, err
		}
	}
	switch strings.ToLower(f.backend) {
	case "auto", "cuda":
	case "cpu":
		return nil, fmt.Errorf("--backend cpu: the overlap benchmark runs GEMMs on a GPU; use auto or cuda")
	default:
		return nil, fmt.Errorf("--backend %q: want auto or cuda", f.backend)
	}
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: must be positive (it bounds every wait)", f.timeout)
	}
	if err := checkRanks(f.n); err != nil {
		return nil, err
	}
	ranks := f.n
	if w, err := strconv.Atoi(os.Getenv("WORLD_SIZE")); err == nil && os.Getenv("RANK") != "" {
		ranks = w
	}
	if err := c.Validate(ranks); err != nil {
		return nil, err
	}
	if f.json != "" {
		if err := checkWritable(f.json); err != nil {
			return nil, fmt.Errorf("-J %s: %w", f.json, err)
		}
	}
	return f, nil
}

func newOverlapCmd() *cobra.Command {
	o := &overlapOpts{}
	cmd := &cobra.Command{
		Use:   "overlap [flags]",
		Short: "how much of a collective hides behind concurrent GEMMs, per algorithm (GPU)",
		Long:  overlapLong,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := o.finish()
			if err != nil {
				return err
			}
			return exitWith(overlapCmd(f, subArgs()))
		},
	}
	o.define(cmd.Flags())
	return cmd
}

// overlapCmd runs a checked overlap benchmark: it starts the ranks, or is
// one. args are bench's arguments ("overlap" first).
func overlapCmd(f *overlapFlags, args []string) int {
	if kind, why, err := symmem.ResolveBackend(f.backend); err == nil && kind != "cuda" {
		fmt.Fprintf(os.Stderr, "symmem bench overlap: needs a GPU (the cuda backend) for its GEMMs; --backend %s resolves to %s here (%s)\n", f.backend, kind, why)
		return 2
	}
	if os.Getenv("RANK") == "" {
		return selfLaunch("bench", f.n, args)
	}
	if err := overlapRank(f, args); err != nil {
		fmt.Fprintf(os.Stderr, "symmem bench overlap (rank %s): %v\n", os.Getenv("RANK"), err)
		return 1
	}
	return 0
}

func overlapRank(f *overlapFlags, args []string) error {
	ctx := context.Background()
	w, err := symmem.Init(ctx, symmem.Options{Backend: f.backend, Timeout: f.timeout})
	if err != nil {
		return err
	}
	defer w.Close()
	t, err := worldtarget.New(ctx, w)
	if err != nil {
		return err
	}
	defer t.Close()
	for _, k := range f.cfg.Ops {
		for _, a := range f.cfg.Algos {
			if err := t.CheckAlgo(k, a); err != nil {
				return fmt.Errorf("--algo %s: %w", a, err)
			}
		}
	}
	o, err := worldtarget.NewOverlap(t, f.timeout)
	if err != nil {
		return err
	}
	defer o.Close()
	cfg := f.cfg
	if t.Rank() == 0 && (f.progress || os.Getenv("SYMMEM_BENCH_TTY") == "1" || isTerminal(os.Stderr)) {
		cfg.Progress = os.Stderr
	}
	rep, err := bench.RunOverlap(o, cfg)
	if err != nil {
		return err
	}
	if t.Rank() != 0 {
		return nil
	}
	rep.Command = strings.TrimSpace("symmem bench " + strings.Join(args, " "))
	rep.Host, rep.Version, rep.Args = hostInfo()+"; "+o.Device(), versionString(), append([]string{"bench"}, args...)
	rep.GEMMLib = o.CUBLAS()
	if err := bench.WriteOverlapTable(os.Stdout, rep); err != nil {
		return err
	}
	if f.json != "" {
		if err := writeJSONFile(f.json, func(w io.Writer) error { return bench.WriteOverlapJSON(w, rep) }); err != nil {
			return err
		}
	}
	if n := rep.WrongTotal(); n != 0 {
		return fmt.Errorf("%d wrong elements (see #wrong)", n)
	}
	return nil
}
