package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGPUTuneFilesComeBack: the device tool brings back at most 8
// files from $OUT, and gpu-tune.sh (unlike gpu-check.sh and gpu-scale.sh)
// has no way to pack its output. The last session's plan,
// `NAME=h100x4-small N=4 DTYPES=bfloat16,float32 MIN=1K MAX=2M F=2 ROUNDS=2
// GRAPH=20 GRAPH_MAX=2M scripts/gpu-tune.sh`, writes per op the table and
// a bench report per dtype, eager and graph (5), plus a log per op and
// env-NAME.log: 19 files. Here the real CLI runs on the CPU backend (a
// wrapper turns --backend cuda into cpu and drops the graph flags, so 13
// files): still past 8.
func TestGPUTuneFilesComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI")
	}
	for _, p := range []string{"bash", "go"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skip("no " + p)
		}
	}
	bin, out := t.TempDir(), t.TempDir()
	cli := filepath.Join(bin, "symmem")
	if b, err := exec.Command("go", "build", "-o", cli, "../cmd/symmem").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	wrap := `#!/usr/bin/env bash
a=()
while [ $# -gt 0 ]; do
  case $1 in
    --backend) a+=(--backend cpu); shift 2;;
    -G|--graph-max) shift 2;;
    *) a+=("$1"); shift;;
  esac
done
exec ` + cli + ` "${a[@]}"
`
	if err := os.WriteFile(filepath.Join(bin, "symmem-cpu"), []byte(wrap), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "gpu-tune.sh", out)
	cmd.Env = append(os.Environ(), "SYMMEM="+filepath.Join(bin, "symmem-cpu"), "CUDA_VISIBLE_DEVICES=0,1,2,3",
		"NAME=h100x4-small", "N=4", "DTYPES=bfloat16,float32", "MIN=1K", "MAX=16K", "F=2", "ROUNDS=2",
		"GRAPH=20", "GRAPH_MAX=2M", "BUDGET=5ms", "OPS=", "T=")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-tune.sh: %v\n%s", err, b)
	}
	var files []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(out, p)
			files = append(files, rel)
		}
		return nil
	})
	if len(files) > 8 {
		t.Errorf("gpu-tune.sh left %d files in its outdir; the device tool returns 8:\n%v", len(files), files)
	}
}
