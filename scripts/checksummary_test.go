package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGPUCheckSummaryStress: gpu-check.sh's summary is meant to show
// each stress run's seed and total (wrong count) from stress*.log, but
// TestGPUStress prints them through t.Logf of each rank's output, indented
// under -test.v (results/gpu-2026-11-26c/call2-world4-stress4-logs:
// "        STRESS total: 4334 cases, ..."): '^STRESS (seed|total)' never
// matched, and hostsstress.log was not among stress*.log (found by
// review). A fake `timeout` prints those lines as the test binary does.
func TestGPUCheckSummaryStress(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin, out := t.TempDir(), t.TempDir()
	fake := `#!/bin/sh
echo "    gpu_stress_test.go:42: rank 0 (exit 0):"
echo "        STRESS seed 17 (replay: SYMMEM_STRESS_SEED=17), 4 ranks, share device false"
echo "        STRESS total: 10 cases, 12 results checked, 3 wrong, 1 s, seed 17"
exit 0
`
	if err := os.WriteFile(filepath.Join(bin, "timeout"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "gpu-check.sh", out)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CUDA_VISIBLE_DEVICES=0,1,2,3",
		"STEPS=stress4 hostsstress", "PACK=", "MPS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, b)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sum), "STRESS total"); n < 2 {
		t.Errorf("summary shows %d STRESS total lines, want one per stress step (stress4, hostsstress):\n%s", n, sum)
	}
}

// TestGPUCheckCallBudget: the device tool kills a command after 600 s, and
// the summary and packed logs with it; the steps share CALL_S seconds from
// the call's start (CALL_T0). A step gets at most what is left and is
// skipped under 30 s; the summary is written either way. (The planned
// `world4 stress4 hosts hostsdie hostsstress hostsbench` had bounds adding
// up to 2190 s: found by review.)
func TestGPUCheckCallBudget(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct {
		ago      int // seconds since the call started
		maxBound int // no step bound above it (CALL_S 560 - ago - 10, a second of slack)
		skipped  bool
	}{{0, 560, false}, {400, 151, false}, {530, 0, true}} {
		bin, out := t.TempDir(), t.TempDir()
		rec := filepath.Join(bin, "bounds")
		fake := "#!/bin/sh\n[ \"$1\" = -k ] && shift 2\necho \"$1\" >>" + rec + "\nexit 0\n"
		if err := os.WriteFile(filepath.Join(bin, "timeout"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "gpu-check.sh", out)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CUDA_VISIBLE_DEVICES=0,1,2,3",
			"STEPS=world4 stress4 hosts hostsdie", "PACK=", "MPS=", "CALL_S=560",
			"CALL_T0="+strconv.FormatInt(time.Now().Unix()-int64(c.ago), 10))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gpu-check.sh: %v\n%s", err, b)
		}
		data, _ := os.ReadFile(rec)
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err != nil || n > c.maxBound {
				t.Errorf("started %d s ago: a step bound %q, want at most %d", c.ago, f, c.maxBound)
			}
		}
		sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
		if err != nil {
			t.Fatalf("started %d s ago: no summary: %v", c.ago, err)
		}
		if got := strings.Contains(string(sum), "rc=skip"); got != c.skipped {
			t.Errorf("started %d s ago: steps skipped %t, want %t:\n%s", c.ago, got, c.skipped, sum)
		}
	}
}
