package cuda

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/rendezvous"
)

// The fake CUDA driver: testdata/fakecuda.c, a stand-in libcuda.so.1 built
// with the C compiler cgo uses, runs the backend's driver calls without a
// GPU so that their error paths can be tested. Any counted call (the
// allocations, streams, events, mappings, waits) can be made to fail with a
// CUresult or to block, at its n-th call or at every one, and every call is
// logged. cudadrv loads the driver once per process, so such a test runs
// its body in a child process of the test binary:
//
//	func TestX(t *testing.T) {
//		if !onFakeCUDA(t, "cuMemRelease:1:2") {
//			return // the parent: the child ran the body below and passed
//		}
//		... // the child, on the fake driver, with these rules
//		setFakeCUDA(t, "cuEventQuery:0:600,cuEventSynchronize:0:-1") // new rules from here on
//		n := fakeCUDACalls(t)["cuMemUnmap"]
//	}
//
// The rules' syntax is in testdata/fakecuda.c ("name:n:code", code -1
// blocks the call until the rules change). onFakeCUDA skips the test where
// no C compiler is found.

// fakeCUDAChild is set, in the child, to the name of the test it runs.
const fakeCUDAChild = "SYMMEM_TEST_FAKECUDA_CHILD"

// onFakeCUDA reports whether the test runs on the fake driver (in the
// child). In the parent it builds the driver, runs the test in a child
// process on it under rules, fails the test with the child's output if the
// child failed, and returns false.
func onFakeCUDA(t *testing.T, rules string) bool {
	t.Helper()
	if os.Getenv(fakeCUDAChild) == t.Name() {
		return true
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake CUDA driver: %v", cc, err)
	}
	dir := t.TempDir()
	so := filepath.Join(dir, "libcuda.so.1")
	if out, err := exec.Command(cc, "-std=gnu11", "-shared", "-fPIC", "-O1", "-o", so, "testdata/fakecuda.c", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the fake CUDA driver: %v\n%s", err, out)
	}
	rfile, log := filepath.Join(dir, "rules"), filepath.Join(dir, "calls.log")
	if err := os.WriteFile(rfile, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	// Generous: a loaded CI machine runs the child slowly, and a child that
	// hangs should fail here rather than at the parent's own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(run, "/"), "-test.v", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), fakeCUDAChild+"="+t.Name(), cudadrv.LibEnv+"="+so, "FAKECUDA_RULES="+rfile, "FAKECUDA_LOG="+log)
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("on the fake CUDA driver: %v\n%s", err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skipf("skipped on the fake CUDA driver:\n%s", out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("on the fake CUDA driver: the child did not pass %s:\n%s", t.Name(), out)
	case testing.Verbose():
		t.Logf("on the fake CUDA driver:\n%s", out)
	}
	return false
}

// setFakeCUDA replaces the fake driver's rules (in the child).
func setFakeCUDA(t *testing.T, rules string) {
	t.Helper()
	path := os.Getenv("FAKECUDA_RULES")
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // whole: the driver never reads half the rules
		t.Fatal(err)
	}
}

// fakeCUDALog is the fake driver's log so far, in call order: "name",
// "name FAILED", "name BLOCKED".
func fakeCUDALog(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(os.Getenv("FAKECUDA_LOG"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
}

// fakeCUDACalls counts the fake driver's log lines so far.
func fakeCUDACalls(t *testing.T) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, l := range fakeCUDALog(t) {
		m[l]++
	}
	return m
}

// fakeExportedFDs counts this process's open fds of /dev/null: the fake
// driver exports every allocation as one.
func fakeExportedFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open fds: %v", err)
	}
	n := 0
	for _, e := range es {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "/dev/null" {
			n++
		}
	}
	return n
}

// fakeBackend opens a backend on the fake driver, without NCCL.
func fakeBackend(t *testing.T) *Backend {
	t.Helper()
	b, err := New(rendezvous.Env{}, Options{NoNCCL: true})
	if err != nil {
		t.Fatalf("New on the fake CUDA driver: %v", err)
	}
	return b
}

// testStore is a store on a local rendezvous server, closed with the test.
func testStore(t *testing.T) *rendezvous.Client {
	t.Helper()
	srv, err := rendezvous.NewServer("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := rendezvous.Dial(context.Background(), srv.Addr(), "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// waitFakeCUDA waits until the fake driver logged line (a call blocked,
// say), generously.
func waitFakeCUDA(t *testing.T, line string) {
	t.Helper()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if fakeCUDACalls(t)[line] > 0 {
			return
		}
	}
	t.Fatalf("the fake CUDA driver never logged %q", line)
}
