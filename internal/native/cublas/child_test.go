package cublas

import (
	"os"
	"os/exec"
	"testing"
)

// runChild re-runs this test binary for one test with the current
// environment (Load caches its result per process, so a fresh process is
// the only way to load again under other settings).
func runChild(t *testing.T, test string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s failed: %v\n%s", test, err, out)
	}
}
