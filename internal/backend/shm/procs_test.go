package shm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/symmem/symmem/launch"
)

// Multi-process tests of the CPU backend through the user API: the test
// binary is started once per rank by package launch (a real job: store,
// torchrun-style environment), procRole naming the body to run.

const procRole = "SYMMEM_SHM_TEST_ROLE"

var procRoles = map[string]func(ctx context.Context) error{}

func TestMain(m *testing.M) {
	if role := os.Getenv(procRole); role != "" {
		f, ok := procRoles[role]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown test role %q\n", role)
			os.Exit(2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
		err := f(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "rank %s: FAIL: %v\n", os.Getenv("RANK"), err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// spawnRanks runs role on n local ranks and fails t unless every rank
// exits 0.
func spawnRanks(t *testing.T, n int, role string) {
	t.Helper()
	var out bytes.Buffer
	code, err := launch.Run(context.Background(), launch.Config{N: n, Prog: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{procRole + "=" + role}, Stdout: &out, Stderr: &out, Timeout: 110 * time.Second})
	if err != nil || code != 0 {
		t.Fatalf("%d ranks of %q: exit %d, %v:\n%s", n, role, code, err, out.String())
	}
}
