package symmem

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestREADMECompiles builds every Go block of README.md as written: each is
// a whole program a user can copy.
func TestREADMECompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command: skipped in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: ", err)
	}
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(text, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go block")
	}
	// Inside the module (a directory the go command's ./... skips), so the
	// blocks import this tree.
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i, b := range blocks {
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, b[1], 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goBin, "build", "-o", os.DevNull, "./"+filepath.ToSlash(dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README.md Go block %d does not build: %v\n%s\n%s", i+1, err, out, b[1])
		}
	}
}
