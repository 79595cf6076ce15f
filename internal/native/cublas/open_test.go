package cublas

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
	fake := filepath.Join(dir, "libcublas.so.13")
	if err := os.WriteFile(fake, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		paths []string
		want  []string // substrings of the error
	}{
		{"nothing", nil, []string{"no candidates", EnvLib}},
		{"absent and fake", []string{filepath.Join(dir, "absent.so"), fake}, []string{"absent.so", fake, EnvLib}},
		// A real library without cuBLAS's symbols.
		{"no symbols", []string{"libc.so.6"}, []string{"libc.so.6", "cublasCreate_v2 missing"}},
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

// TestLoadMissing runs Load in a child process whose only candidate is a
// path that does not exist (the override), so the "missing library" path is
// exercised on every machine.
func TestLoadMissing(t *testing.T) {
	if os.Getenv("SYMMEM_CUBLAS_CHILD") == "1" {
		_, err := Load()
		if err == nil {
			t.Fatal("Load succeeded with a missing library")
		}
		if !errors.Is(err, errs.NotSupported) {
			t.Fatalf("Load error %v does not match errs.NotSupported", err)
		}
		if !strings.Contains(err.Error(), "/nonexistent/libcublas.so.13") || !strings.Contains(err.Error(), EnvLib) {
			t.Fatalf("error %q does not name the path tried and %s", err, EnvLib)
		}
		return
	}
	t.Setenv(EnvLib, "/nonexistent/libcublas.so.13")
	t.Setenv("SYMMEM_CUBLAS_CHILD", "1")
	runChild(t, "TestLoadMissing")
}

// TestLoad runs on any machine: without cuBLAS it must report
// errs.NotSupported naming what it tried and where it searched.
func TestLoad(t *testing.T) {
	l, err := Load()
	if err != nil {
		if !errors.Is(err, errs.NotSupported) {
			t.Fatalf("Load error %v does not match errs.NotSupported", err)
		}
		for _, s := range []string{DefaultNames[0], DefaultNames[1], SiteDirs[0], EnvLib} {
			if os.Getenv(EnvLib) == "" && !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not mention %q", err, s)
			}
		}
		t.Skipf("no cuBLAS here (expected in CI): %v", err)
	}
	t.Logf("loaded %s", l)
	if l.Version[0] < 11 {
		t.Errorf("cuBLAS version %s: want 11 or newer", l.VersionString())
	}
}

func TestGemmValidate(t *testing.T) {
	ok := Gemm{M: 4, N: 3, K: 2, A: 1, B: 2, C: 3, AType: R16BF, BType: R16BF, CType: R32F}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid GEMM refused: %v", err)
	}
	if g := ok.withDefaults(); g.LdA != 4 || g.LdB != 2 || g.LdC != 4 || g.Compute != Compute32F {
		t.Errorf("defaults %+v", g)
	}
	tr := ok
	tr.TransA, tr.TransB = OpT, OpT
	if g := tr.withDefaults(); g.LdA != 2 || g.LdB != 3 {
		t.Errorf("transposed defaults lda=%d ldb=%d, want 2 and 3", g.LdA, g.LdB)
	}
	bad := []struct {
		name string
		f    func(*Gemm)
		want string
	}{
		{"zero dim", func(g *Gemm) { g.K = 0 }, "positive"},
		{"huge dim", func(g *Gemm) { g.M = 1 << 31 }, "C int"},
		{"bad op", func(g *Gemm) { g.TransA = 2 }, "transpose"},
		{"small lda", func(g *Gemm) { g.LdA = 3 }, "leading"},
		{"nil matrix", func(g *Gemm) { g.B = 0 }, "nil matrix"},
		{"compute", func(g *Gemm) { g.Compute = 64 }, "compute type"},
		{"dtype", func(g *Gemm) { g.CType = 1 }, "data type"},
	}
	for _, c := range bad {
		g := ok
		c.f(&g)
		err := g.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "cublasGemmEx", Code: int(StatusNotSupported), Msg: "the functionality requested is not supported"}
	if !errors.Is(e, errs.NotSupported) {
		t.Error("CUBLAS_STATUS_NOT_SUPPORTED does not match errs.NotSupported")
	}
	if !strings.Contains(e.Error(), "CUBLAS_STATUS_NOT_SUPPORTED (15)") {
		t.Errorf("error text %q", e)
	}
	if errors.Is(&Error{Call: "cublasGemmEx", Code: int(StatusInvalidValue)}, errs.NotSupported) {
		t.Error("CUBLAS_STATUS_INVALID_VALUE matches errs.NotSupported")
	}
	if c := (&Error{Call: "cuCtxSetCurrent (before cublasGemmEx)", Code: 201, CUDA: true}); !strings.Contains(c.Error(), "CUDA error 201") {
		t.Errorf("CUDA error text %q", c)
	}
}
