package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/tune"
)

// TestTuneEndToEnd: `symmem tune` on the CPU backend (2 real ranks)
// measures auto and direct per op and dtype, writes a bench report per
// dtype beside the table, and a table that parses: direct everywhere (the
// CPU's one path), built from those reports.
func TestTuneEndToEnd(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cpu2.json")
	stdout, stderr, err := cli(t, "tune", "-o", out, "-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--budget", "0",
		"--dtypes", "bfloat16,float,int32")
	if err != nil {
		t.Fatalf("symmem tune: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"# all_reduce, algo auto", "# all_reduce, algo direct", "# auto/best, all_reduce", "# symmem tune: 5 rows, measured on backend cpu"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := tune.Parse(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if tb.Machine.Backend != "cpu" || !strings.HasPrefix(tb.Command, "symmem tune -o ") || len(tb.Sources) != 3 || tb.Date == "" {
		t.Errorf("table header: %+v", tb)
	}
	for _, r := range tb.Rows {
		if r.Algo != coll.AlgoDirect || r.Class != tune.AnyClass || r.Ranks != (tune.Ranks{Min: 2, Max: 2}) || r.UpTo != 0 {
			t.Errorf("row %s: want direct for every class, 2 ranks, no bound", r)
		}
	}
	ops := len(coll.Kinds())
	if len(tb.Rows) != ops {
		t.Errorf("%d rows, want one per op", len(tb.Rows))
	}
	for _, dt := range []string{"bfloat16", "float", "int32"} {
		path := filepath.Join(dir, "cpu2."+dt+".bench.json")
		js, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var rep bench.Report
		if err := json.Unmarshal(js, &rep); err != nil {
			t.Fatal(err)
		}
		autoBest := 0
		for _, r := range rep.Results {
			if r.Algo == "auto" && r.OutOfPlace != nil && r.OutOfPlace.AutoVsBest > 0 {
				autoBest++
			}
		}
		if rep.DType != dt || rep.Ranks != 2 || len(rep.Results) != ops*2*3 || autoBest != ops*3 || rep.Args[0] != "tune" {
			t.Errorf("%s: dtype %s, %d ranks, %d rows (%d with auto/best), args %q", path, rep.DType, rep.Ranks, len(rep.Results), autoBest, rep.Args)
		}
	}
	// The generator reads the same directory (table and reports) into the
	// same rows.
	ins, _, err := tune.ReadDir(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := tune.NewTable(ins, "gen", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Rows) != len(tb.Rows) {
		t.Errorf("the directory builds %d rows, the table has %d", len(again.Rows), len(tb.Rows))
	}
}

// TestTuneRefusedUpFront: flags that cannot give a table are usage errors
// (exit 2) before any rank starts, and leave no file behind: --algo with no
// path besides auto (it used to run the whole sweep, then fail and leave the
// report), a path the cpu backend lacks (as bench refuses it), --graph-max
// without -G, and a rank count past launch's limit by its own name (-n is
// the iteration count here).
func TestTuneRefusedUpFront(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--algo", "auto"}, "--algo auto: name a path to measure besides auto"},
		{[]string{"--backend", "cpu", "--algo", "ce"}, "--algo ce: not available on the cpu backend"},
		{[]string{"--backend", "cpu", "--algo", "auto,direct,nccl"}, "--algo nccl: not available on the cpu backend"},
		{[]string{"--graph-max", "bogus"}, "--graph-max: bad size"},
		{[]string{"--nproc-per-node", "1025"}, "--nproc-per-node 1025: at most 1024 local ranks"},
	} {
		dir := t.TempDir()
		args := append([]string{"tune", "-o", filepath.Join(dir, "t.json"), "--dtypes", "float", "-b", "1K", "-e", "2K",
			"-n", "5", "-w", "1", "--budget", "1ms", "--ops", "ar"}, tc.args...)
		_, stderr, err := cli(t, args...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("tune %v: %v (want exit status 2), stderr:\n%s\nwant %q", tc.args, err, stderr, tc.want)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("tune %v: left %v behind", tc.args, left)
		}
	}
}

// TestTuneGraphFlags: -G is checked before any rank starts: not negative,
// the cuda backend only, and --graph-max must keep some size; the graph
// replays' report goes beside the eager one.
func TestTuneGraphFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "t.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-G", "-1"}, "-G/--cudagraph -1 must not be negative"},
		{[]string{"-G", "20", "--backend", "cpu"}, "-G 20: CUDA graphs need the cuda backend (this run uses cpu)"},
		{[]string{"-G", "20", "--backend", "cuda", "-b", "1M", "--graph-max", "64K"}, "--graph-max 64K: below the smallest size -b 1048576"},
		{[]string{"-G", "20", "--backend", "cuda", "--graph-max", "lots"}, "--graph-max"},
	} {
		_, stderr, err := cli(t, append([]string{"tune", "-o", out}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("tune %v: err %v, stderr:\n%s\nwant %q", tc.args, err, stderr, tc.want)
		}
	}
	o := &tuneOpts{}
	o.define(pflag.NewFlagSet("t", pflag.ContinueOnError))
	o.out, o.graph, o.graphMax, o.b.f.backend, o.b.b, o.b.e = out, 20, "16K", "cuda", "1K", "1M"
	f, err := o.finish()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10}; !slices.Equal(f.graphSizes, want) || f.graph != 20 {
		t.Errorf("graph sizes %v (%d calls), want %v (20)", f.graphSizes, f.graph, want)
	}
	if got, want := f.reportPath(coll.BFloat16, true), strings.TrimSuffix(out, ".json")+".bfloat16.graph.bench.json"; got != want {
		t.Errorf("graph report %s, want %s", got, want)
	}
}
