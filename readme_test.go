package symmem

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestREADMECompiles builds every Go block of README.md, and every Go block
// of docs/*.md, as written: each is a whole program a user can copy. A
// fragment in docs must not be marked go (use text, or make it whole).
func TestREADMECompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command: skipped in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: ", err)
	}
	goBlock := regexp.MustCompile("(?s)```go\n(.*?)```")
	type block struct {
		file string
		n    int
		src  []byte
	}
	var all []block
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := goBlock.FindAllSubmatch(text, -1)
	if len(readme) == 0 {
		t.Fatal("README.md has no Go block")
	}
	for i, b := range readme {
		all = append(all, block{"README.md", i + 1, b[1]})
	}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range docs {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range goBlock.FindAllSubmatch(text, -1) {
			if !bytes.HasPrefix(b[1], []byte("package ")) {
				t.Errorf("%s Go block %d is not a whole program (it does not start with \"package \"): mark it text, or make it whole", f, i+1)
				continue
			}
			all = append(all, block{f, i + 1, b[1]})
		}
	}
	// Inside the module (a directory the go command's ./... skips), so the
	// blocks import this tree.
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, b := range all {
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, b.src, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(goBin, "build", "-o", os.DevNull, "./"+filepath.ToSlash(dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s Go block %d does not build: %v\n%s\n%s", b.file, b.n, err, out, b.src)
		}
	}
}
