package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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
	cmd.Env = append(cleanEnv(), mainEnv+"=1")
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
	for _, want := range []string{"# all_gather, algo auto", "# broadcast, algo auto", "# all_to_all, algo auto", "Out of bounds values : 0 OK", "busbw"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := parsedRows(t, out); n != 5*4 {
		t.Errorf("%d rows parse as nccl-tests rows, want 20:\n%s", n, out)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Schema != bench.SchemaVersion || rep.Version == "" || len(rep.Args) < 2 || rep.Args[0] != "bench" {
		t.Errorf("report header: schema %d, version %q, args %q", rep.Schema, rep.Version, rep.Args)
	}
	if rep.Ranks != 2 || rep.Backend != "cpu" || len(rep.Results) != 5*4 {
		t.Fatalf("report: %d ranks, backend %q, %d rows; want 2, cpu, 20", rep.Ranks, rep.Backend, len(rep.Results))
	}
	for _, r := range rep.Results {
		ms := []*bench.Measure{r.OutOfPlace, r.InPlace}
		if r.Op == "all_to_all" { // out of place only
			if r.InPlace != nil {
				t.Errorf("%s %d bytes: an in-place measure %+v", r.Op, r.Bytes, r.InPlace)
			}
			ms = ms[:1]
		}
		for _, m := range ms {
			if m == nil || m.Wrong != 0 || m.TimeUs <= 0 || m.Path == "" || m.Samples != m.Iters || m.P50Us <= 0 || m.P99Us < m.P50Us {
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
		"-plain", "-inplace", "no", "-op", "max", "-dtype", "int32", "--nproc-per-node", "3")
	if err != nil {
		t.Fatalf("symmem bench -plain: %v\n%s\n%s", err, out, errs)
	}
	if !strings.Contains(out, "direct+staged") || !strings.Contains(out, "nRanks 3") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("staged run output:\n%s", out)
	}
}

func TestDoctorEndToEnd(t *testing.T) {
	out, errs, err := cli(t, "doctor")
	if err != nil {
		t.Fatalf("symmem doctor: %v\n%s\n%s", err, out, errs)
	}
	for _, want := range []string{"backend:  cpu", "rank 0 of 2", "world", "pool:", "all_gather", "broadcast", "direct+staged",
		"auto:     no table: the cpu backend's auto has one path (direct)"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

// TestDoctorAllPrefixes: with -all every line says which rank wrote it.
func TestDoctorAllPrefixes(t *testing.T) {
	out, errs, err := cli(t, "doctor", "-all")
	if err != nil {
		t.Fatalf("symmem doctor -all: %v\n%s\n%s", err, out, errs)
	}
	ranks := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		p, _, ok := strings.Cut(line, "] ")
		if !ok || (p != "[rank 0" && p != "[rank 1") {
			t.Fatalf("line without a rank prefix: %q", line)
		}
		ranks[p]++
	}
	if len(ranks) != 2 || ranks["[rank 0"] != ranks["[rank 1"] {
		t.Errorf("lines per rank %v, want the same count from both", ranks)
	}
}

// TestBenchOffset: buffers off 16 bytes (--offset) on the CPU backend,
// checked against the serial reference, every op in and out of place; the
// preamble and the JSON say the offset.
func TestBenchOffset(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	out, errs, err := cli(t, "bench", "-b", "4K", "-e", "64K", "-f", "16", "-iters", "2", "-warmup", "0",
		"-dtype", "bfloat16", "--offset", "6", "--nproc-per-node", "3", "-J", js)
	if err != nil {
		t.Fatalf("symmem bench --offset 6: %v\n%s\n%s", err, out, errs)
	}
	if !strings.Contains(out, "symmetric buffers at offset 6") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("output:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil || !strings.Contains(string(b), `"offset": 6`) {
		t.Errorf("JSON lacks the offset (%v):\n%.300s", err, b)
	}
}

func TestBenchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ops", "allgatherx"}, `unknown op "allgatherx"`},
		{[]string{"--ops", "ag,all__gather"}, `--ops: unknown op "all__gather": want all_gather (all-gather, allgather, ag), reduce_scatter`},
		{[]string{"-dtype", "float8"}, `unknown dtype "float8" (want one of float32`},
		{[]string{"-op", "prod"}, `unknown reduction "prod"`},
		{[]string{"-algo", "auto,fast"}, `unknown algorithm "fast" (want one of [auto direct nccl nccl-window ce kernel two-shot lc ll hier])`},
		{[]string{"-b", "1X"}, "-b: bad size"},
		{[]string{"-b", "1M", "-e", "1K"}, "swap -b and -e"},
		{[]string{"-f", "1"}, "factor -f 1"},
		{[]string{"-inplace", "maybe"}, "want both, no or only"},
		{[]string{"-backend", "tpu"}, "want auto, cpu or cuda"},
		{[]string{"-plot", "x.jpg"}, ".svg or .png"},
		{[]string{"-iters", "0"}, "-n/--iters 0"},
		{[]string{"-root", "2"}, "root 2"},
		{[]string{"-n", "0"}, "-n/--iters 0"},
		{[]string{"--nproc-per-node", "0"}, "--nproc-per-node 0"},
		{[]string{"-rounds", "-2"}, "-rounds -2"},
		{[]string{"-rounds", "0"}, "-rounds 0: need at least 1"},
		{[]string{"-budget", "-1s"}, "-budget -1s: must not be negative"},
		{[]string{"-c", "2"}, "-c 2: want 1 (check) or 0"},
		{[]string{"-samples", "-1"}, "--samples -1: must not be negative"},
		{[]string{"-G", "-1"}, "-G/--cudagraph -1: must not be negative"},
		{[]string{"-w", "-1"}, "-w/--warmup -1: must not be negative"},
		{[]string{"-r", "-1"}, "-r/--root -1: outside the"},
		{[]string{"--timeout", "-5s"}, "--timeout -5s: must be positive"},
		{[]string{"-d", "float8"}, `-d: unknown dtype "float8"`},
		{[]string{"-o", "prod"}, `--op: unknown reduction "prod"`},
		{[]string{"-r", "5"}, "root 5"},
		{[]string{"-b", "4", "-e", "4K"}, "-b 4: below 8 bytes (one float element per rank for 2 ranks)"},
		{[]string{"-J", "/nonexistent-dir/r.json"}, "-J /nonexistent-dir/r.json: cannot write the results file"},
		{[]string{"--plot", "/nonexistent-dir/p.svg"}, "--plot /nonexistent-dir/p.svg: cannot write"},
		{[]string{"--lc-ctas", "100"}, "--lc-ctas 100: Options.GPU.LowContentionCTAs 100: want 0"},
		{[]string{"--lc-ctas", "-1"}, "--lc-ctas -1"},
		{[]string{"--ops", "ag,all_gather"}, "--ops: all_gather listed twice"},
		{[]string{"--algo", "auto,nccl,auto"}, "--algo: auto listed twice"},
		{[]string{"--algo", "auto,"}, `--algo "auto,": empty algorithm name`},
		{[]string{"--nproc-per-node", "1025"}, "--nproc-per-node 1025: at most 1024 local ranks"},
		{[]string{"--offset", "2"}, "--offset 2: want a multiple of float32's 4-byte elements from 0 to 4095"},
		{[]string{"--offset", "-4"}, "--offset -4"},
		{[]string{"--offset", "4096"}, "--offset 4096"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--nosuchflag"}, "unknown flag: --nosuchflag"},
		{[]string{"-nosuchflag"}, `invalid argument "osuchflag" for "-n, --iters" flag`},
	} {
		_, err := parseBenchFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
		// The CLI prints "symmem bench: " before it: a package prefix
		// inside doubled it ("symmem bench: bench: -n/--iters 0 ...").
		if err != nil && strings.Contains(err.Error(), "bench: ") {
			t.Errorf("%v: error %q carries a second \"bench: \" prefix", c.args, err)
		}
	}
	f, err := parseBenchFlags([]string{"-ops", "ag,ar", "-b", "4K", "-e", "1M", "-f", "4", "-inplace", "only", "-algo", "direct"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.cfg.Ops) != 2 || f.cfg.Ops[1] != coll.AllReduce || len(f.cfg.Sizes) != 5 || f.cfg.OutOfPlace || !f.cfg.InPlace || f.cfg.Algos[0] != coll.AlgoDirect {
		t.Errorf("parsed %+v", f.cfg)
	}
	// nccl-tests' spellings land where the long names do.
	js := filepath.Join(t.TempDir(), "r.json")
	f, err = parseBenchFlags([]string{"-n", "7", "-w", "3", "-c", "0", "-d", "half", "-o", "max", "-r", "1", "-J", js, "--nproc-per-node", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c := f.cfg; c.Iters != 7 || c.Warmup != 3 || c.Check || c.DType != coll.Float16 || c.RedOp != coll.Max || c.Root != 1 || f.json != js || f.n != 4 {
		t.Errorf("nccl-tests flags parsed as %+v (json %q, ranks %d)", c, f.json, f.n)
	}
	if _, err := os.Stat(js); !os.IsNotExist(err) {
		t.Errorf("the up-front -J check left a file behind: %v", err)
	}
}

// TestBenchRootInJob: inside a launched job the root is checked against
// WORLD_SIZE before any work, as outside it against --nproc-per-node (it
// was not checked at all: every rank joined the job, then failed with
// status 1 instead of the usage error, 2).
func TestBenchRootInJob(t *testing.T) {
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	for _, c := range []struct {
		args []string
		want string // "" for no error
	}{
		{[]string{"-r", "3"}, "-r: root 3 is outside the 3 ranks (WORLD_SIZE)"},
		{[]string{"-r", "3", "--nproc-per-node", "8"}, "-r: root 3 is outside the 3 ranks (WORLD_SIZE)"},
		{[]string{"-r", "2"}, ""}, // --nproc-per-node (2) does not count in a job
		{[]string{"-r", "-1"}, "root -1"},
	} {
		_, err := parseBenchFlags(c.args, io.Discard)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	out, errs, err := cli(t, "launch", "-n", "2", "--", os.Args[0], "bench", "-r", "2", "-b", "1K", "-e", "1K")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(errs, "root 2 is outside the 2 ranks (WORLD_SIZE)") {
		t.Errorf("launch -n 2 -- symmem bench -r 2: %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
}

// TestBenchAlgoNames: --algo's help lists every algorithm, and each parses.
func TestBenchAlgoNames(t *testing.T) {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	(&benchOpts{}).define(fs)
	usage := fs.Lookup("algo").Usage
	for _, a := range coll.Algos() {
		if !slices.Contains(strings.Split(strings.TrimPrefix(usage, "comma-separated algorithms: "), ", "), string(a)) {
			t.Errorf("--algo's help %q does not list %q", usage, a)
		}
		if got, err := parseAlgos(" " + strings.ToUpper(string(a))); err != nil || len(got) != 1 || got[0] != a {
			t.Errorf("parseAlgos(%q) = %v, %v", a, got, err)
		}
	}
}

// TestBenchAlgoNotOnBackend: a valid algorithm the CPU backend lacks is a
// clear error before anything runs.
func TestBenchAlgoNotOnBackend(t *testing.T) {
	out, errs, err := cli(t, "bench", "-backend", "cpu", "-algo", "ce", "-b", "1K", "-e", "1K")
	if err == nil || !strings.Contains(errs, `-algo ce: not available on the cpu backend (valid: auto, direct; the GPU paths need --backend cuda)`) {
		t.Errorf("err %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
}

// ncclRow is the row pattern of published nccl-tests parsers (see
// bench.TestTableParses for its source).
var ncclRow = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s*$`)

// outOfPlaceRow is a row with the out-of-place columns only (all-to-all,
// --inplace no).
var outOfPlaceRow = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)\s*$`)

func parsedRows(t *testing.T, out string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if ncclRow.MatchString(line) || outOfPlaceRow.MatchString(line) {
			n++
		} else if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("line neither a row nor a comment: %q", line)
		}
	}
	return n
}

// TestBenchStreamsRows: rows reach stdout while the sweep still runs; a run
// killed after its first row keeps what it printed.
func TestBenchStreamsRows(t *testing.T) {
	cmd := exec.Command(os.Args[0], "bench", "-ops", "ag", "-b", "1K", "-e", "16M", "-w", "1", "-budget", "300ms")
	cmd.Env = append(cleanEnv(), mainEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(stdout)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if ncclRow.MatchString(sc.Text()) {
			break
		}
	}
	if len(seen) == 0 || !ncclRow.MatchString(seen[len(seen)-1]) {
		t.Fatalf("no row before the kill; got:\n%s", strings.Join(seen, "\n"))
	}
	// 15 sizes of at least 300 ms each: the sweep is still running. Kill
	// it; what follows must not contain the sweep's closing line.
	cmd.Process.Kill()
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "# symmem: ") {
			t.Fatalf("the sweep had ended before its first row was read: %q", sc.Text())
		}
	}
	if !strings.Contains(strings.Join(seen, "\n"), "#       size         count      type   redop    root     time") {
		t.Errorf("nccl-tests header missing:\n%s", strings.Join(seen, "\n"))
	}
}

// TestBenchUnderTorchrunEnv starts two ranks of `symmem bench` the way
// torchrun does: only torchrun's variables (no SYMMEM_*), and a real
// listener holding MASTER_PORT as torchrun's agent store does.
func TestBenchUnderTorchrunEnv(t *testing.T) {
	var holder net.Listener
	var port int
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		if next, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1)); err == nil {
			next.Close()
			holder = ln
			break
		}
		ln.Close()
	}
	defer holder.Close()
	go func() { // accept and hold, never answer
		for {
			c, err := holder.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	const n = 2
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	outs := make([]bytes.Buffer, n)
	cmds := make([]*exec.Cmd, n)
	for r := range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "bench", "-ops", "ar,ag", "-b", "1K", "-e", "64K", "-f", "8", "-n", "3", "-w", "1")
		cmd.Env = append(cleanEnv(), mainEnv+"=1",
			"RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
			"GROUP_RANK=0", "ROLE_RANK="+strconv.Itoa(r), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port),
			"TORCHELASTIC_RUN_ID=test-"+strconv.Itoa(port), "TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=0")
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, &outs[r])
		}
	}
	if got := parsedRows(t, outs[0].String()); got != 2*3 || !strings.Contains(outs[0].String(), "nRanks 2") {
		t.Errorf("rank 0 printed %d rows, want 6:\n%s", got, &outs[0])
	}
}

// cleanEnv is this process's environment without any job variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SYMMEM_TOKEN", "SYMMEM_JOB_ID",
			"SYMMEM_STORE_HOSTED", "SYMMEM_STORE", "SYMMEM_PORT", "TORCHELASTIC_RUN_ID", "SYMMEM_AUTO_TABLE":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// TestExitCodes: help exits 0 for every command, usage errors 2, and
// --version, version and completion work.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string // in stdout+stderr
	}{
		{[]string{"-h"}, 0, "Available Commands"},
		{[]string{"--help"}, 0, "completion"},
		{[]string{"launch", "-h"}, 0, "--nproc-per-node"},
		{[]string{"bench", "-h"}, 0, "-J, --json"},
		{[]string{"doctor", "--help"}, 0, "--all"},
		{[]string{"version", "-h"}, 0, "print the version"},
		{[]string{"--version"}, 0, "symmem "},
		{[]string{"version"}, 0, "symmem "},
		{[]string{"completion", "bash"}, 0, "bash completion"},
		{[]string{"completion", "nosuch"}, 2, `unknown shell "nosuch": want one of bash, fish, powershell, zsh`},
		{[]string{"completion"}, 2, "no shell given"},
		{[]string{"help", "bench"}, 0, "-J, --json"},
		{[]string{"help", "nosuch"}, 2, `unknown help topic "nosuch"`},
		{[]string{"help", "bench", "nosuch"}, 2, `unknown help topic "bench nosuch"`},
		{nil, 2, "no command given"},
		{[]string{"nosuch"}, 2, `unknown command "nosuch"`},
		{[]string{"bench", "--nosuch"}, 2, "unknown flag: --nosuch"},
		{[]string{"bench", "-rounds", "0"}, 2, "-rounds 0: need at least 1"},
		{[]string{"bench", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"launch"}, 2, "need --nproc-per-node N"},
		{[]string{"launch", "-n", "1", "--timeout", "-1s", "true"}, 2, "must not be negative"},
		{[]string{"launch", "-n", "1", "--master-port", "70000", "true"}, 2, "--master-port 70000"},
		{[]string{"launch", "-n", "1", "--grace", "0", "true"}, 2, "--grace 0s: must be positive, e.g. 100ms"},
		{[]string{"launch", "-n", "1025", "true"}, 2, "--nproc-per-node 1025: at most 1024 local ranks"},
		{[]string{"doctor", "--nproc-per-node", "1025"}, 2, "--nproc-per-node 1025: at most 1024 local ranks"},
		{[]string{"doctor", "--timeout", "0s"}, 2, "--timeout 0s: must be positive"},
		{[]string{"launch", "--nproc-per-node", "1", "--", "false"}, 1, ""},
		{[]string{"launch", "-n", "1", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"doctor", "-backend", "tpu"}, 2, "want auto, cpu or cuda"},
		{[]string{"bench", "--backend", "cpu", "-G", "4"}, 2, "-G 4: CUDA graphs need the cuda backend (this run uses cpu)"},
		{[]string{"tune", "-h"}, 0, "--dtypes"},
		{[]string{"tune"}, 2, "-o/--out: name the table file to write"},
		{[]string{"tune", "-o", "t.json", "--dtypes", "bf16,half"}, 2, "bfloat16 and half are both 16-bit-float"},
		{[]string{"tune", "-o", "t.json", "--algo", "fast"}, 2, `unknown algorithm "fast"`},
		{[]string{"tune", "-o", "/nonexistent/dir/t.json"}, 2, "-o /nonexistent/dir/t.json"},
	} {
		out, errs, err := cli(t, c.args...)
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if code != c.code || !strings.Contains(out+errs, c.out) {
			t.Errorf("symmem %q: exit %d, want %d; output lacks %q?\n%s%s", c.args, code, c.code, c.out, out, errs)
		}
	}
}

// TestCompatArgs: single-dash long flags of earlier versions become
// double-dash; nccl-tests' letters, values and a launched program's own
// flags stay as typed.
func TestCompatArgs(t *testing.T) {
	bench, launchCmd := newBenchCmd().Flags(), newLaunchCmd().Flags()
	for _, c := range []struct {
		fs           *pflag.FlagSet
		interspersed bool
		in, want     string
	}{
		{bench, true, "-ops ag -b 1K -iters=5 -plain -dtype -d", "--ops ag -b 1K --iters=5 --plain --dtype -d"},
		{bench, true, "-n 3 --nproc_per_node 2 -J -ops", "-n 3 --nproc_per_node 2 -J -ops"},
		{bench, true, "-backend cuda -- -ops", "--backend cuda -- -ops"},
		{launchCmd, false, "-n 2 -timeout 60s prog -timeout 5 -ops", "-n 2 --timeout 60s prog -timeout 5 -ops"},
		{launchCmd, false, "-nproc-per-node 2 -no-prefix -- prog -grace", "--nproc-per-node 2 --no-prefix -- prog -grace"},
	} {
		got := strings.Join(compatArgs(c.fs, strings.Fields(c.in), c.interspersed), " ")
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

// TestBenchTooBig: a sweep that cannot fit says what it asked for, the
// limit and what to do, in the user's terms (it named an internal call,
// "CheckFits(8796093022208)").
func TestBenchTooBig(t *testing.T) {
	for _, plain := range []bool{false, true} {
		args := []string{"bench", "-backend", "cpu", "-ops", "ar", "-b", "4096G", "-e", "4096G"}
		if plain {
			args = append(args, "--plain")
		}
		out, errs, err := cli(t, args...)
		for _, want := range []string{"-e/--maxbytes ", "not enough memory", "available", "lower -e/--maxbytes"} {
			if err == nil || !strings.Contains(errs, want) {
				t.Errorf("%v: err %v, stderr lacks %q\nstdout:\n%s\nstderr:\n%s", args, err, want, out, errs)
			}
		}
		if strings.Contains(errs, "CheckFits") {
			t.Errorf("%v: stderr names an internal call:\n%s", args, errs)
		}
	}
}

// TestBenchSkipsPairsTheBackendLacks: a list of algorithms some of which
// the backend lacks for some ops runs the others and prints one line per
// skipped pair (it aborted the whole run); on the CPU backend the GPU
// paths are such pairs. A list with nothing the backend has, or an
// unknown name, is still refused up front (TestBenchAlgoNotOnBackend,
// TestBenchFlagErrors).
func TestBenchSkipsPairsTheBackendLacks(t *testing.T) {
	out, errs, err := cli(t, "bench", "-backend", "cpu", "--ops", "all_gather,reduce_scatter,all_reduce",
		"--algo", "kernel,two-shot,ll,ce,lc,auto", "-b", "1K", "-e", "4K", "-n", "2", "-w", "1", "--budget", "0", "--samples", "0")
	if err != nil {
		t.Fatalf("err %v\nstdout:\n%s\nstderr:\n%s", err, out, errs)
	}
	for _, op := range []string{"all_gather", "reduce_scatter", "all_reduce"} {
		for _, a := range []string{"kernel", "two-shot", "ll", "ce", "lc"} {
			want := "# " + op + " with --algo " + a + ": refused, skipped: algorithm \"" + a + "\" is not available for " + op + " on the cpu backend"
			if strings.Count(out, want) != 1 {
				t.Errorf("stdout has not one %q", want)
			}
		}
	}
	if n := parsedRows(t, out); n != 9 { // auto: 3 ops x 3 sizes
		t.Errorf("%d rows, want 9 (auto's)\n%s", n, out)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)
	}
}

// parseBenchFlags parses and checks args as `symmem bench` would.
func parseBenchFlags(args []string, stderr io.Writer) (*benchFlags, error) {
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &benchOpts{}
	o.define(fs)
	if err := fs.Parse(compatArgs(fs, args, true)); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only; see symmem bench -h)", fs.Arg(0))
	}
	return o.finish()
}
