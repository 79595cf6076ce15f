package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLauncherFromAnotherModule: a user's own module gets the launcher the
// ways README.md and docs/cli.md say: `go get` of the command's package
// (not just the module: that leaves cobra's go.sum entries out, and `go
// run github.com/symmem/symmem/cmd/symmem` failed on a missing go.sum
// entry, as the last case checks), then `go run` of it; or `go get -tool`
// and `go tool symmem`.
// symmem comes from this checkout (replace), its dependencies from the
// module cache (GOPROXY=off, GOSUMDB=off: no network). go mod tidy is not
// used: it also wants the test dependencies of dependencies, which a
// cache filled by building symmem lacks.
func TestLauncherFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the launcher in a separate module with the go command: skipped in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: ", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := ""
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "go "); ok {
				goVersion = strings.TrimSpace(v)
			}
		}
	}
	if goVersion == "" {
		t.Fatal("no go directive in the repository's go.mod")
	}
	modcache, err := exec.Command(goBin, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	env := append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local",
		"GOMODCACHE="+strings.TrimSpace(string(modcache)), "RANK=", mainEnv+"=")
	for _, tc := range []struct {
		name  string
		steps [][]string // go command lines; the last prints the version
		fails string     // what the last one's output says, where the docs warn it fails
	}{
		{"go get, go run", [][]string{
			{"get", "github.com/symmem/symmem/cmd/symmem@v0.0.0"},
			{"run", "github.com/symmem/symmem/cmd/symmem", "version"},
		}, ""},
		{"go get -tool, go tool", [][]string{
			{"get", "-tool", "github.com/symmem/symmem/cmd/symmem@v0.0.0"},
			{"tool", "symmem", "version"},
		}, ""},
		{"go get of the module only", [][]string{
			{"get", "github.com/symmem/symmem@v0.0.0"},
			{"run", "github.com/symmem/symmem/cmd/symmem", "version"},
		}, "missing go.sum entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// v0.0.0 stands for the version a user requires; replace
			// points it at this checkout.
			mod := "module example.com/user\n\ngo " + goVersion + "\n\nrequire github.com/symmem/symmem v0.0.0\n\n" +
				"replace github.com/symmem/symmem => " + root + "\n"
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
				t.Fatal(err)
			}
			var out []byte
			for i, args := range tc.steps {
				cmd := exec.Command(goBin, args...)
				cmd.Dir, cmd.Env = dir, env
				start := time.Now()
				out, err = cmd.CombinedOutput()
				t.Logf("go %s: %.1f s", strings.Join(args, " "), time.Since(start).Seconds())
				if tc.fails != "" && i == len(tc.steps)-1 {
					if err == nil || !strings.Contains(string(out), tc.fails) {
						t.Fatalf("go %s: %v, want a failure saying %q (the docs warn of it)\n%s", strings.Join(args, " "), err, tc.fails, out)
					}
					return
				}
				if err != nil && strings.Contains(string(out), "GOPROXY=off") {
					t.Skipf("the module cache lacks a dependency (go mod download in the repository fills it): go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				if err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			if !strings.HasPrefix(string(out), "symmem ") {
				t.Errorf("symmem version printed %q", out)
			}
		})
	}
}
