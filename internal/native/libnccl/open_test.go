package libnccl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/internal/errs"
)

func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "libnccl.so.2")
	if err := os.WriteFile(fake, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		paths []string
		want  []string // substrings of the error
	}{
		{"nothing", nil, []string{"no candidates"}},
		{"absent and fake", []string{filepath.Join(dir, "absent.so"), fake}, []string{"absent.so", fake, EnvLib}},
		// A real library without NCCL's symbols.
		{"no symbols", []string{"libc.so.6"}, []string{"libc.so.6", "ncclGetVersion missing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := Open(c.paths)
			if err == nil {
				t.Fatalf("Open(%q) = %v, want an error", c.paths, l)
			}
			if !errors.Is(err, errs.NotSupported) {
				t.Errorf("error %v does not match errs.NotSupported", err)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestLoad runs on any machine: without NCCL it must report errs.NotSupported
// naming what it tried; with NCCL it reports the version and keeps NVLS off.
func TestLoad(t *testing.T) {
	l, err := Load()
	if err != nil {
		if !errors.Is(err, errs.NotSupported) {
			t.Fatalf("Load error %v does not match errs.NotSupported", err)
		}
		if !strings.Contains(err.Error(), DefaultName) {
			t.Errorf("error %q does not list %s", err, DefaultName)
		}
		t.Skipf("no NCCL here (expected in CI): %v", err)
	}
	t.Logf("loaded %s, NCCL %s, windows=%v cuda=%v", l.Path, l.VersionString(), l.HasWindows, l.HasCUDA)
	if l.Version <= 0 {
		t.Errorf("version %d", l.Version)
	}
	if l.HasWindows != (l.Version >= MinWindowVersion) {
		t.Logf("note: windows=%v with version %s", l.HasWindows, l.VersionString())
	}
	if os.Getenv("NCCL_NVLS_ENABLE") == "" {
		t.Error("NCCL_NVLS_ENABLE not set after Load")
	}
	if !l.HasWindows {
		if _, err := l.WindowRegister(t.Context(), 0, 0, 0, 0, 0); !errors.Is(err, errs.NotSupported) {
			t.Errorf("WindowRegister without the symbol: %v, want errs.NotSupported", err)
		}
	}
}
