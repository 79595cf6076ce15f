package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/dl"
)

// ErrNotReady is matched by a query whose work is still running.
var ErrNotReady = errors.New("cuda: not ready")

// LibEnv names the environment variable that overrides the library path.
const LibEnv = "SYMMEM_LIBCUDA"

// Driver results the package reasons about.
const (
	resNotReady     = 600
	resNotSupported = 801
	resNoDevice     = 100
)

// Error is a failing driver call.
type Error struct {
	Call string // the driver call or helper that failed, e.g. "cuMemCreate"
	Code int    // the CUresult
	Name string // cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s failed: %s (%d)", e.Call, e.Name, e.Code)
}

// Is makes errors.Is(err, errs.NotSupported) and errors.Is(err, ErrNotReady)
// hold for the matching results.
func (e *Error) Is(target error) bool {
	switch target {
	case errs.NotSupported:
		return e.Code == resNotSupported || e.Code == resNoDevice
	case ErrNotReady:
		return e.Code == resNotReady
	}
	return false
}

// LoadError says why the driver library could not be used; it matches
// errs.NotSupported.
type LoadError struct {
	Path   string
	Reason string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("cuda: cannot use %s: %s (install the NVIDIA driver, or set %s to libcuda.so.1's path)", e.Path, e.Reason, LibEnv)
}

func (e *LoadError) Is(target error) bool { return target == errs.NotSupported }

var (
	loadOnce sync.Once
	loadErr  error
	driver   int
	ndev     int
	names    sync.Map // CUresult -> name
)

// Load opens the driver library (once per process), initialises CUDA and
// reports the driver version and device count. It is safe to call often.
func Load() error {
	loadOnce.Do(func() {
		path := "libcuda.so.1"
		if p := os.Getenv(LibEnv); p != "" {
			path = p
		}
		lib, err := dl.Open(path)
		if err == nil {
			if err = lib.Bind(driverSyms()); err != nil {
				lib.Close()
			}
		}
		if err != nil {
			loadErr = &LoadError{Path: path, Reason: err.Error()}
			return
		}
		var d, n C.int
		if err := check("cuInit", C.symc_init(&d, &n)); err != nil {
			loadErr = fmt.Errorf("cuda: initialising the driver: %w", err)
			return
		}
		driver, ndev = int(d), int(n)
		if ndev == 0 {
			loadErr = &LoadError{Path: path, Reason: "the driver reports no CUDA device"}
		}
	})
	return loadErr
}

// driverSyms is shim.c's table of entry points as package dl binds it.
func driverSyms() []dl.Sym {
	var n C.int
	t := unsafe.Slice(C.symc_syms(&n), int(n))
	syms := make([]dl.Sym, len(t))
	for i, e := range t {
		syms[i] = dl.Sym{Slot: (*unsafe.Pointer)(unsafe.Pointer(e.slot)), Required: e.required != 0}
		for _, name := range e.names {
			if name != nil {
				syms[i].Names = append(syms[i].Names, C.GoString(name))
			}
		}
	}
	return syms
}

// DriverVersion is the CUDA driver API version (e.g. 13000); Load must have
// succeeded.
func DriverVersion() int { return driver }

// check turns a CUresult into an *Error (nil for CUDA_SUCCESS).
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: errName(int(r))}
}

func errName(code int) string {
	if v, ok := names.Load(code); ok {
		return v.(string)
	}
	var buf [96]C.char
	name := fmt.Sprintf("CUresult %d", code)
	if C.symc_error_name(C.CUresult(code), &buf[0], C.int(len(buf))) == 0 && buf[0] != 0 {
		name = C.GoString(&buf[0])
	}
	names.Store(code, name)
	return name
}
