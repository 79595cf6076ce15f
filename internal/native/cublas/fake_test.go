package cublas

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFakeLibrary loads testdata/fakecublas.c (built here with the C
// compiler cgo uses) beside a fake libcuda.so.1, in a child process whose
// loader path holds both, and checks every argument the wrappers pass —
// the GemmEx argument order, the float alpha/beta, the enum values, the
// packed leading dimensions, the context made current before each call —
// and the error mapping. No GPU needed.
func TestFakeLibrary(t *testing.T) {
	if os.Getenv("SYMMEM_CUBLAS_FAKE_CHILD") == "1" {
		fakeChild(t)
		return
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) to build the fake cuBLAS: %v", cc, err)
	}
	dir := t.TempDir()
	for src, so := range map[string]string{"fakecublas.c": "libcublas.so.13", "fakecuda.c": "libcuda.so.1"} {
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", filepath.Join(dir, so), filepath.Join("testdata", src)).CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", src, err, out)
		}
	}
	t.Setenv("LD_LIBRARY_PATH", dir)
	t.Setenv("FAKE_CUBLAS_LOG", filepath.Join(dir, "calls.log"))
	t.Setenv("SYMMEM_CUBLAS_FAKE_CHILD", "1")
	t.Setenv(EnvLib, "")
	runChild(t, "TestFakeLibrary")
}

func fakeChild(t *testing.T) {
	logPath := os.Getenv("FAKE_CUBLAS_LOG")
	l, err := Load() // finds libcublas.so.13 on the loader path
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "libcublas.so.13" || l.VersionString() != "13.1.2" {
		t.Errorf("loaded %s, want libcublas.so.13 version 13.1.2", l)
	}
	if _, err := l.New(0); err == nil {
		t.Error("New(0) succeeded: a handle needs a context")
	}
	if _, err := l.New(0xbad); err == nil || !strings.Contains(err.Error(), "cuCtxSetCurrent (before cublasCreate_v2) failed: CUDA error 201") {
		t.Errorf("New with a failing context: %v", err)
	}
	h, err := l.New(0x1000)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := h.Version(); err != nil || v != 130102 {
		t.Errorf("Version = %d, %v", v, err)
	}
	if err := h.SetStream(0x5000); err != nil {
		t.Fatal(err)
	}
	g := Gemm{TransB: OpT, M: 64, N: 32, K: 16, A: 0xa000, B: 0xb000, C: 0xc000,
		AType: R16BF, BType: R16BF, CType: R32F, Alpha: 1.5, Beta: 0.25}
	if err := h.Gemm(g); err != nil {
		t.Fatal(err)
	}
	g.M, g.Compute, g.LdC = 13, Compute32FPedantic, 20
	err = h.Gemm(g)
	var ce *Error
	if !errors.As(err, &ce) || Status(ce.Code) != StatusInvalidValue || !strings.Contains(err.Error(),
		"cublasGemmEx failed: CUBLAS_STATUS_INVALID_VALUE (7): an invalid value was used as an argument (13x32x16 bf16·bf16→f32)") {
		t.Errorf("refused GEMM: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"ctx 0xbad",
		"ctx 0x1000", "create",
		"ctx 0x1000",
		"ctx 0x1000", "stream ok=1 s=0x5000",
		"ctx 0x1000", "gemm ok=1 ta=0 tb=1 m=64 n=32 k=16 alpha=1.5 A=0xa000 at=14 lda=64 B=0xb000 bt=14 ldb=32 beta=0.25 C=0xc000 ct=0 ldc=64 compute=68 algo=-1",
		"ctx 0x1000", "gemm ok=1 ta=0 tb=1 m=13 n=32 k=16 alpha=1.5 A=0xa000 at=14 lda=13 B=0xb000 bt=14 ldb=32 beta=0.25 C=0xc000 ct=0 ldc=20 compute=69 algo=-1",
		"ctx 0x1000", "destroy ok=1",
	}, "\n") + "\n"
	if string(b) != want {
		t.Errorf("calls:\n%s\nwant:\n%s", b, want)
	}
}
