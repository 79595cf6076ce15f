package scripts_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestGPUABExitStatus: gpu-ab.sh (and gpu-ab-paths.sh, which execs
// it) exits 0 after a run whose benches all ran (its last line was
// `[ -n "${AB_IN_PLACE:-}" ] && {...}`: without AB_IN_PLACE it exited 1
// though nothing failed; found by review). The launcher and builds are /bin/true here
// (no GPU needed); CUDA_VISIBLE_DEVICES makes gpu-lib.sh count 2 GPUs.
func TestGPUABExitStatus(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "gpu-ab.sh", out, "1")
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES=0,1", "LAUNCHER=true", "BUILDS=A=true B=true", "AB_IN_PLACE=")
	b, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(out + "/ab.log")
		t.Errorf("gpu-ab.sh: %v after a clean run\n%s\nab.log:\n%s", err, b, log)
	}
}
