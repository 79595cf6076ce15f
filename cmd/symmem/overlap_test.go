package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
)

func TestOverlapFlags(t *testing.T) {
	f, err := parseOverlapFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if len(c.Ops) != 2 || c.Ops[0] != coll.AllGather || c.Ops[1] != coll.ReduceScatter || c.Bytes != 1<<30 ||
		c.DType != coll.BFloat16 || c.GEMM != (bench.GEMMShape{M: 8192, N: 8192, K: 8192}) || c.GEMMs != 30 || c.Calls != 10 ||
		!c.FSDP || c.FSDPRank != 64<<20 || c.FSDPIter != 10 || c.Reps != 5 || len(c.Algos) != 0 {
		t.Errorf("defaults %+v", c)
	}
	// Algorithm names the CLI does not know yet (a backend's new path) pass
	// here: the ranks check them against the world's own list.
	f, err = parseOverlapFlags([]string{"--ops", "ag", "--size", "256M", "--gemm", "4096x2048x1024", "--gemms", "3",
		"--algo", "ce,Kernel,some-new-path", "-w", "0", "--reps", "3", "--no-fsdp", "-gemms", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if len(c.Ops) != 1 || c.Bytes != 256<<20 || c.GEMM != (bench.GEMMShape{M: 4096, N: 2048, K: 1024}) || c.GEMMs != 4 ||
		strings.Join([]string{string(c.Algos[0]), string(c.Algos[1]), string(c.Algos[2])}, ",") != "ce,kernel,some-new-path" ||
		c.Warmup != 0 || c.Reps != 3 || c.FSDP {
		t.Errorf("parsed %+v", c)
	}
	for _, b := range []struct {
		args []string
		want string
	}{
		{[]string{"--ops", "broadcast"}, "--ops broadcast: the overlap benchmark has no broadcast; want all_gather, reduce_scatter or all_reduce"},
		{[]string{"--ops", "ag,bc"}, "--ops ag,bc: the overlap benchmark has no broadcast"},
		{[]string{"--ops", "all"}, "--ops all: all includes broadcast, which the overlap benchmark lacks; name the ops, e.g. --ops all_gather,reduce_scatter,all_reduce"},
		{[]string{"--fsdp-size", "3"}, "--fsdp-size 3: want a multiple of bfloat16's 2-byte elements, e.g. 2"},
		{[]string{"--fsdp-size", "1000001", "-d", "float"}, "--fsdp-size 1000001: want a multiple of float's 4-byte elements, e.g. 1000000"},
		{[]string{"--algo", "ce,kernel,CE"}, "--algo: ce listed twice"},
		{[]string{"--nproc-per-node", "1025"}, "--nproc-per-node 1025: at most 1024 local ranks"},
		{[]string{"--ops", "gather"}, `unknown op "gather"`},
		{[]string{"--gemm", "8x9"}, `--gemm "8x9": want N or MxNxK`},
		{[]string{"--gemm", "0"}, `"0" is not a dimension`},
		{[]string{"--gemms", "0"}, "--gemms 0"},
		{[]string{"--calls", "0"}, "--calls 0"},
		{[]string{"--reps", "0"}, "--reps 0"},
		{[]string{"--size", "1X"}, "--size: bad size"},
		{[]string{"--size", "2"}, "below one bfloat16 element per rank"},
		{[]string{"--fsdp-size", "x"}, "--fsdp-size: bad size"},
		{[]string{"--fsdp-iters", "0"}, "FSDP case needs"},
		{[]string{"--algo", "ce,,kernel"}, "empty algorithm name"},
		{[]string{"--backend", "cpu"}, "runs GEMMs on a GPU"},
		{[]string{"--backend", "tpu"}, "want auto or cuda"},
		{[]string{"--timeout", "0s"}, "--timeout 0s"},
		{[]string{"-d", "float8"}, `-d: unknown dtype "float8"`},
		{[]string{"-J", "/nonexistent-dir/o.json"}, "cannot write the results file"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		if _, err := parseOverlapFlags(b.args, io.Discard); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%v: error %v, want it to contain %q", b.args, err, b.want)
		}
	}
	// Without the FSDP case its size is not used.
	if _, err := parseOverlapFlags([]string{"--no-fsdp", "--fsdp-size", "3"}, io.Discard); err != nil {
		t.Errorf("--no-fsdp --fsdp-size 3: %v", err)
	}
}

// TestOverlapNeedsGPU: without a GPU the subcommand says so and exits 2,
// before starting ranks; bad flags name the subcommand (once: no
// "symmem bench overlap: bench: ...").
func TestOverlapNeedsGPU(t *testing.T) {
	if kind, _, err := symmem.ResolveBackend("auto"); err != nil || kind == "cuda" {
		t.Skipf("a GPU is usable here (auto = %s, %v): the GPU script runs the real benchmark", kind, err)
	}
	_, errs, err := cli(t, "bench", "overlap", "--size", "1M")
	if err == nil || !strings.Contains(errs, "symmem bench overlap: needs a GPU (the cuda backend) for its GEMMs; --backend auto resolves to cpu") {
		t.Errorf("err %v, stderr:\n%s", err, errs)
	}
	_, errs, err = cli(t, "bench", "overlap", "-gemms", "0")
	if err == nil || !strings.Contains(errs, "symmem bench overlap: --gemms 0: need at least 1") || !strings.Contains(errs, "Run 'symmem bench overlap -h'") {
		t.Errorf("err %v, stderr:\n%s", err, errs)
	}
}

// parseOverlapFlags parses and checks args as `symmem bench overlap` would.
func parseOverlapFlags(args []string, stderr io.Writer) (*overlapFlags, error) {
	fs := pflag.NewFlagSet("overlap", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &overlapOpts{}
	o.define(fs)
	if err := fs.Parse(compatArgs(fs, args, true)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only; see symmem bench overlap -h)", fs.Arg(0))
	}
	return o.finish()
}
