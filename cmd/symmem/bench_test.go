package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
)

// The end-to-end tests run the real CLI: the test binary re-executes itself
// as `symmem` (TestMain sees the variable), which launches 2 real rank
// processes of itself through package launch.
const mainEnv = "SYMMEM_CLI_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// cli runs the CLI with args outside any job and returns its output.
func cli(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SYMMEM_TOKEN", "SYMMEM_JOB_ID", "SYMMEM_STORE_HOSTED", "SYMMEM_STORE", "SYMMEM_PORT", "TORCHELASTIC_RUN_ID":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, mainEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func TestBenchEndToEnd(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.svg")
	out, errs, err := cli(t, "bench", "-b", "1K", "-e", "1M", "-f", "8", "-iters", "3", "-warmup", "1",
		"-dtype", "bf16", "-json", js, "-plot", svg)
	if err != nil {
		t.Fatalf("symmem bench: %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
	for _, want := range []string{"# all_gather, algo auto", "# broadcast, algo auto", "Out of bounds values : OK", "busbw"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Ranks != 2 || rep.Backend != "cpu" || len(rep.Results) != 4*4 {
		t.Fatalf("report: %d ranks, backend %q, %d rows; want 2, cpu, 16", rep.Ranks, rep.Backend, len(rep.Results))
	}
	for _, r := range rep.Results {
		for _, m := range []*bench.Measure{r.OutOfPlace, r.InPlace} {
			if m == nil || m.Wrong != 0 || m.TimeUs <= 0 || m.Path == "" {
				t.Errorf("%s %d bytes: %+v", r.Op, r.Bytes, m)
			}
		}
		if r.MemcpyGBps <= 0 {
			t.Errorf("%s %d bytes: no memcpy baseline", r.Op, r.Bytes)
		}
	}
	if fi, err := os.Stat(svg); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

func TestBenchStagedPlainMemory(t *testing.T) {
	out, errs, err := cli(t, "bench", "-ops", "ar,rs", "-b", "64K", "-e", "64K", "-iters", "2", "-warmup", "0",
		"-plain", "-inplace", "no", "-op", "max", "-dtype", "int32", "-n", "3")
	if err != nil {
		t.Fatalf("symmem bench -plain: %v\n%s\n%s", err, out, errs)
	}
	if !strings.Contains(out, "direct+staged") || !strings.Contains(out, "3 ranks") || !strings.Contains(out, "Out of bounds values : OK") {
		t.Errorf("staged run output:\n%s", out)
	}
}

func TestDoctorEndToEnd(t *testing.T) {
	out, errs, err := cli(t, "doctor")
	if err != nil {
		t.Fatalf("symmem doctor: %v\n%s\n%s", err, out, errs)
	}
	for _, want := range []string{"backend:  cpu", "rank 0 of 2", "world", "pool:", "all_gather", "broadcast", "direct+staged"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ops", "allgatherx"}, `unknown op "allgatherx"`},
		{[]string{"-dtype", "float8"}, `unknown dtype "float8" (want one of float32`},
		{[]string{"-op", "prod"}, `unknown reduction "prod"`},
		{[]string{"-algo", "auto,fast"}, `unknown algorithm "fast" (want auto, direct, nccl, nccl-window, ce or kernel)`},
		{[]string{"-b", "1X"}, "-b: bad size"},
		{[]string{"-b", "1M", "-e", "1K"}, "swap -b and -e"},
		{[]string{"-f", "1"}, "factor -f 1"},
		{[]string{"-inplace", "maybe"}, "want both, no or only"},
		{[]string{"-backend", "tpu"}, "want auto, cpu or cuda"},
		{[]string{"-plot", "x.jpg"}, ".svg or .png"},
		{[]string{"-iters", "0"}, "-iters 0"},
		{[]string{"-root", "2"}, "root 2"},
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-rounds", "-2"}, "-rounds -2"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		_, err := parseBenchFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
	f, err := parseBenchFlags([]string{"-ops", "ag,ar", "-b", "4K", "-e", "1M", "-f", "4", "-inplace", "only", "-algo", "direct"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.cfg.Ops) != 2 || f.cfg.Ops[1] != coll.AllReduce || len(f.cfg.Sizes) != 5 || f.cfg.OutOfPlace || !f.cfg.InPlace || f.cfg.Algos[0] != coll.AlgoDirect {
		t.Errorf("parsed %+v", f.cfg)
	}
}

// TestBenchAlgoNotOnBackend: a valid algorithm the CPU backend lacks is a
// clear error before anything runs.
func TestBenchAlgoNotOnBackend(t *testing.T) {
	out, errs, err := cli(t, "bench", "-backend", "cpu", "-algo", "ce", "-b", "1K", "-e", "1K")
	if err == nil || !strings.Contains(errs, `-algo ce: not available on the cpu backend (valid: auto, direct; nccl, nccl-window, ce and kernel need -backend cuda)`) {
		t.Errorf("err %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
}
