package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestGPUPlan40: gpu-plan40.sh's calls fit the device tool's 600 s. Each
// call's expected seconds (`gpu-plan40.sh list`, on 4 H100s) add up to at
// most CALL_S (560) less 40 s for the start, the table and the packing;
// and every call runs through on 4 and on 2 GPUs with a fake `timeout`
// (no step runs), leaving only summary.txt and logs.tgz (the device tool
// returns 8 files), with 4-GPU parts skipped by name on 2.
func TestGPUPlan40(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command("bash", "gpu-plan40.sh", "list").Output()
	if err != nil {
		t.Fatalf("gpu-plan40.sh list: %v", err)
	}
	sum := map[string]int{}
	var calls []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("plan line %q: want call, step, seconds, what", line)
		}
		s, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("plan line %q: seconds: %v", line, err)
		}
		if _, ok := sum[f[0]]; !ok {
			calls = append(calls, f[0])
		}
		sum[f[0]] += s
	}
	for _, c := range calls {
		if sum[c] > 520 {
			t.Errorf("call %s: expected %d s, want at most 520 (CALL_S 560 less 40)", c, sum[c])
		}
	}
	if testing.Short() {
		return
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\nexit 0\n" // timeout: no step runs
	if err := os.WriteFile(filepath.Join(bin, "timeout"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, gpus := range []string{"0,1,2,3", "0,1"} {
		for _, c := range calls {
			dir := t.TempDir()
			cmd := exec.Command("bash", "gpu-plan40.sh", c, dir)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CUDA_VISIBLE_DEVICES="+gpus,
				"CALL_S=560", "CALL_T0=", "STEPS=", "SIZES=", "OUT=")
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("%s on GPUs %s: %v\n%s", c, gpus, err, b)
				continue
			}
			if !strings.Contains(string(b), "gpu-plan40 "+c) {
				t.Errorf("%s on GPUs %s: no table:\n%s", c, gpus, b)
			}
			if gpus == "0,1" && (c == "tune4a" || c == "check4") && !strings.Contains(string(b), "skipped, 2 GPUs (needs 4)") {
				t.Errorf("%s on 2 GPUs: no line saying its 4-GPU steps were skipped:\n%s", c, b)
			}
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != "logs.tgz summary.txt" {
				t.Errorf("%s on GPUs %s left %v, want logs.tgz and summary.txt", c, gpus, names)
			}
		}
	}
}
