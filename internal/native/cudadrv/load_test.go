package cudadrv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/symmem/symmem/internal/errs"
)

// gpu skips the test unless the driver loads and a device exists.
func gpu(t *testing.T) {
	t.Helper()
	if err := Load(); err != nil {
		t.Skipf("no usable CUDA driver: %v", err)
	}
}

func TestErrorMatchesSentinels(t *testing.T) {
	tests := []struct {
		code                   int
		notSupported, notReady bool
	}{
		{801, true, false}, {100, true, false}, {600, false, true}, {2, false, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			var err error = fmt.Errorf("wrapped: %w", &Error{Call: "cuX", Code: tc.code, Name: "N"})
			if errors.Is(err, errs.NotSupported) != tc.notSupported {
				t.Errorf("Is(errs.NotSupported) = %v", !tc.notSupported)
			}
			if errors.Is(err, ErrNotReady) != tc.notReady {
				t.Errorf("Is(ErrNotReady) = %v", !tc.notReady)
			}
		})
	}
}

// TestMissingLibrary loads from a path that does not exist, in a child
// process (Load runs once per process).
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("SYMMEM_CUDA_TEST_CHILD") == "missing" {
		err := Load()
		if err == nil {
			fmt.Println("RESULT loaded")
			os.Exit(3)
		}
		if !errors.Is(err, errs.NotSupported) {
			fmt.Printf("RESULT wrong error: %v\n", err)
			os.Exit(4)
		}
		if _, err := DeviceCount(); !errors.Is(err, errs.NotSupported) {
			fmt.Printf("RESULT DeviceCount: %v\n", err)
			os.Exit(5)
		}
		if _, err := Retain(0); !errors.Is(err, errs.NotSupported) {
			fmt.Printf("RESULT Retain: %v\n", err)
			os.Exit(6)
		}
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$")
	cmd.Env = append(os.Environ(), "SYMMEM_CUDA_TEST_CHILD=missing", LibEnv+"=/nonexistent/libcuda.so.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestLoadHere(t *testing.T) {
	err := Load()
	if err != nil && !errors.Is(err, errs.NotSupported) {
		t.Fatalf("Load failed with an error that does not match errs.NotSupported: %v", err)
	}
	if err != nil {
		t.Skipf("no CUDA here (expected in CI): %v", err)
	}
	t.Logf("driver %d, %d devices", DriverVersion(), ndev)
}
