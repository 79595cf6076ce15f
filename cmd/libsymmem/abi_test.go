package main

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/launch"
)

// The library is built once per test binary, into a temporary folder.
var built struct {
	once     sync.Once
	dir, err string
}

// library builds libsymmem.so (and cgo's header beside it) with the go
// command that runs the tests.
func library(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "libsymmem-test-")
		if err != nil {
			built.err = err.Error()
			return
		}
		// go test puts its own GOROOT/bin first in the test's PATH.
		goCmd, err := exec.LookPath("go")
		if err != nil {
			built.err = "no go command: " + err.Error()
			return
		}
		cmd := exec.Command(goCmd, "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libsymmem.so"), ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = "go build -buildmode=c-shared: " + err.Error() + "\n" + string(out)
			return
		}
		built.dir = dir
	})
	if built.err != "" {
		t.Fatal(built.err)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

var (
	comments  = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	prototype = regexp.MustCompile(`(?m)^(?:extern\s+)?([A-Za-z_][\w\s\*]*?)\s*\b(symmem_\w+)\s*\(([^)]*)\)\s*;`)
	typedefs  = strings.NewReplacer("symmem_world_t", "uint64_t", "symmem_group_t", "uint64_t", "symmem_scope_t", "uint64_t")
	spaces    = regexp.MustCompile(`\s+`)
)

// prototypes parses the symmem_ function declarations of a C header into
// name -> normalised signature: parameter names, const and the ABI's
// typedefs dropped ("int(uint64_t,void*,size_t)").
func prototypes(t *testing.T, path string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := comments.ReplaceAllString(string(src), "")
	out := map[string]string{}
	for _, m := range prototype.FindAllStringSubmatch(text, -1) {
		var params []string
		for _, p := range strings.Split(m[3], ",") {
			if p = normType(p); p != "" && p != "void" {
				params = append(params, dropName(p))
			}
		}
		out[m[2]] = normType(m[1]) + "(" + strings.Join(params, ",") + ")"
	}
	return out
}

func normType(s string) string {
	s = typedefs.Replace(s)
	s = strings.ReplaceAll(s, "const ", "")
	s = strings.ReplaceAll(s, "*", " * ")
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	return strings.ReplaceAll(s, " *", "*")
}

// dropName removes a trailing parameter name ("void* ptr" -> "void*").
func dropName(p string) string {
	i := strings.LastIndexAny(p, " *")
	if i < 0 {
		return p
	}
	typ := strings.TrimSpace(p[:i+1])
	if typ == "" {
		return p
	}
	return typ
}

func TestHeaderMatchesLibrary(t *testing.T) {
	dir := library(t)
	want := prototypes(t, filepath.Join("..", "..", "include", "symmem.h"))
	if len(want) < 25 {
		t.Fatalf("parsed only %d prototypes from include/symmem.h: %v", len(want), want)
	}
	// Every exported Go function has the header's signature.
	goSide := prototypes(t, filepath.Join(dir, "libsymmem.h"))
	if len(goSide) == 0 {
		t.Fatal("parsed no prototypes from cgo's libsymmem.h")
	}
	for name, sig := range goSide {
		if want[name] != sig {
			t.Errorf("%s: include/symmem.h declares %q, the Go export is %q", name, want[name], sig)
		}
	}
	// The library's symmem_ symbols are exactly the header's functions.
	f, err := elf.Open(filepath.Join(dir, "libsymmem.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "symmem_") && s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			have[s.Name] = true
		}
	}
	for name := range want {
		if !have[name] {
			t.Errorf("include/symmem.h declares %s, the library does not export it", name)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("the library exports %s, include/symmem.h does not declare it", name)
		}
	}
	// Functions written in C (abi.c) are checked by its compiler: it
	// includes the header.
	if _, ok := goSide["symmem_last_error"]; ok || !have["symmem_last_error"] {
		t.Errorf("symmem_last_error should come from abi.c (exported: %v)", have["symmem_last_error"])
	}
}

func TestHeaderConstants(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "include", "symmem.h"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]int{}
	for _, m := range regexp.MustCompile(`(SYMMEM_\w+)\s*(?:=|\s)\s*(-?\d+)\b`).FindAllStringSubmatch(string(src), -1) {
		n, _ := strconv.Atoi(m[2])
		vals[m[1]] = n
	}
	want := map[string]int{
		"SYMMEM_ABI_VERSION": abiVersion, "SYMMEM_INIT_CHECKED": initChecked, "SYMMEM_PATH_STAGED": coll.PathStaged,
		"SYMMEM_OK": statusOK, "SYMMEM_ERR_INVALID": statusInvalid, "SYMMEM_ERR_NOT_SUPPORTED": statusNotSupported,
		"SYMMEM_ERR_NOT_MEMBER": statusNotMember, "SYMMEM_ERR_MISMATCH": statusMismatch, "SYMMEM_ERR_CLOSED": statusClosed,
		"SYMMEM_ERR_TIMEOUT": statusTimeout, "SYMMEM_ERR_PEER": statusPeer, "SYMMEM_ERR_BAD_HANDLE": statusBadHandle,
		"SYMMEM_ERR_INTERNAL": statusInternal, "SYMMEM_ERR_NO_MEMORY": statusNoMemory,
		// NCCL's values (ncclDataType_t, ncclRedOp_t).
		"SYMMEM_INT8": 0, "SYMMEM_UINT8": 1, "SYMMEM_INT32": 2, "SYMMEM_INT64": 4, "SYMMEM_FLOAT16": 6,
		"SYMMEM_FLOAT32": 7, "SYMMEM_FLOAT64": 8, "SYMMEM_BFLOAT16": 9,
		"SYMMEM_SUM": 0, "SYMMEM_PROD": 1, "SYMMEM_MAX": 2, "SYMMEM_MIN": 3, "SYMMEM_AVG": 4,
	}
	for name, v := range want {
		if got, ok := vals[name]; !ok || got != v {
			t.Errorf("include/symmem.h: %s = %d (found %v), the library uses %d", name, got, ok, v)
		}
	}
	for i, k := range kinds {
		name := "SYMMEM_" + strings.ToUpper(k.String())
		if got, ok := vals[name]; !ok || got != i {
			t.Errorf("include/symmem.h: %s = %d (found %v), the library decodes %v from %d", name, got, ok, k, i)
		}
	}
	for i, a := range algos {
		name := "SYMMEM_ALGO_" + strings.ToUpper(strings.ReplaceAll(string(a), "-", "_"))
		if got, ok := vals[name]; !ok || got != i {
			t.Errorf("include/symmem.h: %s = %d (found %v), the library decodes %q from %d", name, got, ok, a, i)
		}
	}
	for name, path := range map[string]int{"SYMMEM_PATH_DIRECT": 0, "SYMMEM_PATH_NCCL": 1, "SYMMEM_PATH_NCCL_WINDOW": 2,
		"SYMMEM_PATH_CE": 3, "SYMMEM_PATH_KERNEL": 4, "SYMMEM_PATH_TWO_SHOT": 5, "SYMMEM_PATH_LC": 6, "SYMMEM_PATH_LL": 7} {
		if vals[name] != path {
			t.Errorf("include/symmem.h: %s = %d, want %d", name, vals[name], path)
		}
	}
	// Every algorithm but auto has its own path code without the staged bit,
	// the one pathCode returns (the Python package's PATHS numbers them the
	// same way: python/symmem/_codes.py, generated from coll).
	seen := map[int]coll.Algo{}
	for _, a := range algos[1:] {
		name := "SYMMEM_PATH_" + strings.ToUpper(strings.ReplaceAll(string(a), "-", "_"))
		c := int(pathCode(coll.Path{Algo: a}))
		if got, ok := vals[name]; !ok || got != c {
			t.Errorf("include/symmem.h: %s = %d (found %v), the library returns %d for %q", name, got, ok, c, a)
		}
		if c&coll.PathStaged != 0 {
			t.Errorf("path code %d of %q collides with SYMMEM_PATH_STAGED (%d)", c, a, coll.PathStaged)
		}
		if b, dup := seen[c]; dup {
			t.Errorf("path code %d is both %q and %q", c, b, a)
		}
		seen[c] = a
		if int(pathCode(coll.Path{Algo: a, Staged: true})) != c|coll.PathStaged {
			t.Errorf("pathCode(%q staged) = %d, want %d", a, int(pathCode(coll.Path{Algo: a, Staged: true})), c|coll.PathStaged)
		}
	}
}

// TestPython runs the Python package's standard-library tests on the CPU
// backend: the standalone tests (init arguments, a world of one), the torch
// path and symmem.fsdp on faketorch, then under
// the launcher the suite with 2 ranks in checked mode and with 3 ranks
// unchecked, and the fault script (allocation mismatch, a rank that dies).
func TestPython(t *testing.T) {
	if raceEnabled {
		t.Skip("the Python suite runs in the non-race pass: the library it loads is not race-instrumented")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python package's tests need it")
	}
	dir := library(t)
	pkg, err := filepath.Abs(filepath.Join("..", "..", "python"))
	if err != nil {
		t.Fatal(err)
	}
	// Read the Python sources here: go test caches a result by the files
	// the test itself opens, and python3 opens these.
	err = filepath.WalkDir(pkg, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".py") {
			_, err = os.ReadFile(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"SYMMEM_LIBRARY=" + filepath.Join(dir, "libsymmem.so"), "PYTHONPATH=" + pkg, "PYTHONDONTWRITEBYTECODE=1"}
	// Plain processes: no launcher. test_torch_path.py checks the torch path
	// against the general path on fake tensors, test_fsdp.py symmem.fsdp on
	// faketorch's FSDP2 (no torch needed), test_moe_dispatch.py the routing
	// logic of bench/e2e/moe_dispatch.py (read here too: it lies outside
	// python/, and go test caches by the files the test opens).
	if _, err := os.ReadFile(filepath.Join(pkg, "..", "bench", "e2e", "moe_dispatch.py")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"test_standalone.py", "test_torch_path.py", "test_fsdp.py", "test_moe_dispatch.py"} {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(f, "test_"), ".py"), func(t *testing.T) {
			cmd := exec.Command(py, filepath.Join(pkg, "tests", f))
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	suite := filepath.Join(pkg, "tests", "test_cpu.py")
	t.Run("suite/n=2/torchrun-env", func(t *testing.T) { pythonUnderTorchrunEnv(t, py, suite, env) })
	// The CPU-only example (standard library and symmem only), as its
	// docstring runs it: every rank must check its result and say so.
	t.Run("example/cpu_allreduce/n=2", func(t *testing.T) {
		ex := filepath.Join(pkg, "..", "examples", "python", "cpu_allreduce.py")
		if _, err := os.ReadFile(ex); err != nil { // read here: go test caches by the files it opens
			t.Fatal(err)
		}
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		code, err := launch.Run(ctx, launch.Config{N: 2, Prog: py, Args: []string{ex}, Env: env, Stdout: &out, Stderr: &out, Timeout: time.Minute})
		if err != nil || code != 0 {
			t.Fatalf("exit %d, err %v; output:\n%s", code, err, out.String())
		}
		for r := range 2 {
			if want := fmt.Sprintf("rank %d/2: all-reduce of 65536 float32 ok (path direct", r); !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
	runs := []struct {
		name string
		n    int
		env  []string
		args []string
		want []string // lines every surviving rank prints
	}{
		{"suite/n=2/checked", 2, []string{"SYMMEM_TEST_CHECKED=1"}, []string{suite}, nil},
		{"suite/n=3", 3, nil, []string{suite}, nil},
		{"faults/n=3", 3, nil, []string{filepath.Join(pkg, "tests", "faults.py")},
			[]string{"alloc mismatch raised MismatchError", "dead peer raised PeerError"}},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			code, err := launch.Run(ctx, launch.Config{N: r.n, Prog: py, Args: r.args, Env: append(append([]string{}, env...), r.env...),
				Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
			if err != nil || code != 0 {
				t.Fatalf("exit %d, err %v; output:\n%s", code, err, out.String())
			}
			text := out.String()
			if r.want == nil && strings.Count(text, "] OK") < r.n {
				t.Fatalf("not every rank reported OK:\n%s", text)
			}
			for _, w := range r.want {
				if c := strings.Count(text, w); c < r.n-1 {
					t.Errorf("%q printed by %d ranks, want %d:\n%s", w, c, r.n-1, text)
				}
			}
			lines := strings.Split(strings.TrimSpace(text), "\n")
			sort.Strings(lines)
			t.Logf("%d ranks; last lines:\n%s", r.n, strings.Join(lines[max(0, len(lines)-6):], "\n"))
		})
	}
}

// pythonUnderTorchrunEnv runs the suite on 2 ranks that see only what
// torchrun sets: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT — held by a listener standing in for torchrun's
// agent store, which never answers — TORCHELASTIC_RUN_ID and
// TORCHELASTIC_USE_AGENT_STORE; no SYMMEM_* variable.
func pythonUnderTorchrunEnv(t *testing.T, py, suite string, env []string) {
	// Other packages' tests run beside this one and take ports: a run that
	// lost MASTER_PORT+1 to one of them between the probe and the bind is
	// tried again; any other failure is reported.
	for try := 1; ; try++ {
		outs, ok := runUnderTorchrunEnv(t, py, suite, env)
		if ok {
			return
		}
		if try < 3 && bytes.Contains(bytes.Join(outs, nil), []byte("bind: address already in use")) {
			t.Logf("try %d: symmem's store port was taken meanwhile; again", try)
			continue
		}
		for r, out := range outs {
			if out != nil {
				t.Errorf("rank %d under torchrun's variables:\n%s", r, out)
			}
		}
		return
	}
}

// agentListener listens where torchrun's agent store would, on a port whose
// successor (symmem's store) is free at the time of asking.
func agentListener(t *testing.T) net.Listener {
	for i := 0; i < 20; i++ {
		agent, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := agent.Addr().(*net.TCPAddr).Port
		if port < 65535 {
			if next, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1)); err == nil {
				next.Close()
				return agent
			}
		}
		agent.Close()
	}
	t.Skip("no port pair with MASTER_PORT+1 free for symmem's store in 20 tries")
	return nil
}

// runUnderTorchrunEnv runs both ranks once; it returns each failed rank's
// error and output (nil for a rank that passed) and whether both passed.
func runUnderTorchrunEnv(t *testing.T, py, suite string, env []string) ([][]byte, bool) {
	agent := agentListener(t)
	defer agent.Close()
	go func() { // accept and hold connections, like a store that is not ours
		for {
			c, err := agent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := agent.Addr().(*net.TCPAddr).Port
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SYMMEM_") && !strings.HasPrefix(kv, "RANK=") && !strings.HasPrefix(kv, "WORLD_SIZE=") &&
			!strings.HasPrefix(kv, "LOCAL_") && !strings.HasPrefix(kv, "MASTER_") && !strings.HasPrefix(kv, "TORCHELASTIC_") {
			base = append(base, kv)
		}
	}
	base = append(base, env...)
	run := fmt.Sprintf("symmem-python-test-%d", os.Getpid())
	type result struct {
		rank int
		out  []byte
		err  error
	}
	ch := make(chan result, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for r := 0; r < 2; r++ {
		cmd := exec.CommandContext(ctx, py, suite)
		cmd.Env = append(append([]string{}, base...), fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2", fmt.Sprintf("LOCAL_RANK=%d", r),
			"LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port),
			"TORCHELASTIC_RUN_ID="+run, "TORCHELASTIC_USE_AGENT_STORE=True")
		go func(r int) {
			out, err := cmd.CombinedOutput()
			ch <- result{r, out, err}
		}(r)
	}
	outs, ok := make([][]byte, 2), true
	for i := 0; i < 2; i++ {
		x := <-ch
		if x.err != nil || !bytes.Contains(x.out, []byte("\nOK")) {
			outs[x.rank] = append([]byte(fmt.Sprintf("%v\n", x.err)), x.out...)
			ok = false
		}
	}
	return outs, ok
}

// cProgram uses the header from C: it must compile on its own, link against
// the library, and report errors through the status codes and the
// per-thread message.
const cProgram = `#include <stdio.h>
#include <string.h>
#include "symmem.h"

int main(void) {
  if (symmem_abi_version() != SYMMEM_ABI_VERSION) return 10;
  if (symmem_world_rank((symmem_world_t)77) != SYMMEM_ERR_BAD_HANDLE) return 11;
  if (strstr(symmem_last_error(), "77") == NULL) return 12;
  symmem_world_t w = 0;
  if (symmem_init_explicit(0, 1, 0, 1, "127.0.0.1", 1, "", "job", "cpu", 0, 0, &w) != SYMMEM_ERR_INVALID) return 13;
  if (strstr(symmem_last_error(), "token is empty") == NULL) return 14;
  if (symmem_torch_alloc(64, 0, NULL) != NULL) return 15;
  if (strstr(symmem_last_error(), "no open symmem world") == NULL) return 16;
  if (symmem_collective(77, SYMMEM_CALL(9, SYMMEM_FLOAT32, SYMMEM_SUM, SYMMEM_ALGO_AUTO, 0), NULL, NULL, 0, NULL) !=
      SYMMEM_ERR_INVALID) return 17;
  if (strstr(symmem_last_error(), "kind 9") == NULL) return 18;
  int dev = 5;
  if (symmem_world_device((symmem_world_t)77, &dev) != SYMMEM_ERR_BAD_HANDLE || dev != 5) return 25;
  void* api[7] = {0};
  if (symmem_py_bind(NULL, 7) != SYMMEM_ERR_INVALID || symmem_py_bind(api, 3) != SYMMEM_ERR_INVALID ||
      symmem_py_bind(api, 7) != SYMMEM_ERR_INVALID) return 19;
  if (symmem_py_collective(NULL, NULL, 6) != NULL) return 20;  // unbound: no call
  printf("call %llu %llu\n", (unsigned long long)SYMMEM_CALL(SYMMEM_BROADCAST, SYMMEM_BFLOAT16, SYMMEM_MAX, SYMMEM_ALGO_KERNEL, -1),
         (unsigned long long)SYMMEM_CALL(SYMMEM_REDUCE_SCATTER, SYMMEM_INT8, SYMMEM_AVG, SYMMEM_ALGO_NCCL_WINDOW, 70000));
  printf("ok: %s\n", symmem_last_error());
  return 0;
}
`

// cCommand compiles a C program against include/symmem.h and the library
// and returns the command that runs it.
func cCommand(t *testing.T, cc, program string, args ...string) *exec.Cmd {
	t.Helper()
	dir := library(t)
	work := t.TempDir()
	src := filepath.Join(work, "main.c")
	if err := os.WriteFile(src, []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, _ := filepath.Abs(filepath.Join("..", "..", "include"))
	bin := filepath.Join(work, "main")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Werror", "-I", inc, src, "-L", dir, "-lsymmem", "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("compiling a C program against include/symmem.h: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	return cmd
}

func TestHeaderFromC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build a C program against include/symmem.h")
	}
	cmd := cCommand(t, cc, cProgram)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the C program failed (%v):\n%s", err, out)
	}
	t.Logf("%s", out)
	// The header's SYMMEM_CALL and the library's decoder agree.
	var c1, c2 uint64
	if _, err := fmt.Sscanf(string(out), "call %d %d", &c1, &c2); err != nil {
		t.Fatalf("no call words in the C program's output: %v", err)
	}
	for _, tc := range []struct {
		call uint64
		want args
	}{
		{c1, args{kind: coll.Broadcast, dtype: 9, op: 2, root: -1, algo: coll.AlgoKernel}},
		{c2, args{kind: coll.ReduceScatter, dtype: 0, op: 4, root: 70000, algo: coll.AlgoNCCLWindow}},
	} {
		got, err := unpack(tc.call)
		if err != nil || got != tc.want {
			t.Errorf("unpack(%#x) = %+v, %v; want %+v", tc.call, got, err, tc.want)
		}
	}
}

// TestCostProgram builds the C cost benchmark (testdata/abi_cost.c, run by
// scripts/python-cost.sh and scripts/gpu-python.sh) and runs a few calls of
// it on the CPU backend, so the benchmark cannot rot between GPU runs.
func TestCostProgram(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build testdata/abi_cost.c")
	}
	dir := library(t)
	inc, _ := filepath.Abs(filepath.Join("..", "..", "include"))
	bin := filepath.Join(t.TempDir(), "abi_cost")
	if out, err := exec.Command(cc, "-O2", "-std=c11", "-Wall", "-Werror", "-I", inc, filepath.Join("testdata", "abi_cost.c"),
		"-L", dir, "-lsymmem", "-Wl,-rpath,"+dir, "-ldl", "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("compiling testdata/abi_cost.c: %v\n%s", err, out)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := launch.Run(ctx, launch.Config{N: 1, Prog: bin, Args: []string{"cpu", "400"}, Stdout: &out, Stderr: &out,
		Timeout: time.Minute})
	if err != nil || code != 0 {
		t.Fatalf("abi_cost: exit %d, err %v:\n%s", code, err, out.String())
	}
	for _, want := range []string{"symmem_abi_version", "symmem_all_reduce, stream NULL", "symmem_collective, stream NULL", `"algo":"direct"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("abi_cost printed no %q row:\n%s", want, out.String())
		}
	}
}

func TestUnpackRejects(t *testing.T) {
	for _, tc := range []struct {
		call uint64
		want string
	}{
		{5, "kind 5"},
		{0xff, "kind 255"},
		{2 | 10<<24, "algorithm code 10"},
	} {
		a, err := unpack(tc.call)
		if err == nil {
			err = a.err
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || code(err) != statusInvalid {
			t.Errorf("unpack(%#x): %v, want an invalid-argument error naming %q", tc.call, err, tc.want)
		}
	}
}
