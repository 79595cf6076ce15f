package cublas

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/dl"
)

// Lib is one loaded libcublas with its resolved entry points.
type Lib struct {
	Path    string   // the candidate that loaded (as given to dlopen)
	Version [3]int   // cublasGetProperty: major, minor, patch
	Tried   []string // "candidate: why it failed", for those tried before Path

	c *C.scb_lib // C memory, never freed (the library stays loaded)
}

// VersionString is Version as "13.0.2".
func (l *Lib) VersionString() string {
	return fmt.Sprintf("%d.%d.%d", l.Version[0], l.Version[1], l.Version[2])
}

func (l *Lib) String() string { return fmt.Sprintf("%s (cuBLAS %s)", l.Path, l.VersionString()) }

var (
	loadOnce sync.Once
	loadLib  *Lib
	loadErr  error
)

// Load finds and loads cuBLAS once per process (see Candidates for the
// order) and returns the same result on every call.
func Load() (*Lib, error) {
	loadOnce.Do(func() {
		loadLib, loadErr = Open(Candidates(os.Getenv, filepath.Glob))
		if le, ok := loadErr.(*LoadError); ok && os.Getenv(EnvLib) == "" {
			le.Where = SearchedWhere()
		}
	})
	return loadLib, loadErr
}

// Open tries each candidate in order and returns the first that loads with
// every required symbol. The error is a *LoadError (matching
// errs.NotSupported) listing every path tried with its reason.
func Open(candidates []string) (*Lib, error) {
	var tried []string
	for _, p := range candidates {
		cl, err := open(p)
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		l := &Lib{Path: p, Tried: tried, c: cl}
		for i := range l.Version {
			// libraryPropertyType (library_types.h): MAJOR_VERSION = 0,
			// MINOR_VERSION = 1, PATCH_LEVEL = 2. Unknown (0.0.0) when the
			// library lacks cublasGetProperty.
			var v C.int
			if r := C.scb_property(cl, C.int(i), &v); r == absent {
				break
			} else if r != 0 {
				return nil, l.err("cublasGetProperty", r)
			}
			l.Version[i] = int(v)
		}
		return l, nil
	}
	return nil, &LoadError{Tried: tried}
}

// open loads the library at p and binds its entry points, and the CUDA
// driver's cuCtxSetCurrent (the wrappers make the caller's context current).
// The error names p and what is missing.
func open(p string) (*C.scb_lib, error) {
	lib, err := dl.Open(p)
	if err != nil {
		return nil, err
	}
	cl := (*C.scb_lib)(C.calloc(1, C.sizeof_scb_lib))
	slot := func(f **[0]byte) *unsafe.Pointer { return (*unsafe.Pointer)(unsafe.Pointer(f)) }
	// cuBLAS exports the "_v2" entry points that cublas_v2.h maps the plain
	// names to; the plain name is the fallback for a library that exports
	// only it.
	err = lib.Bind([]dl.Sym{
		{Slot: slot(&cl.create), Names: []string{"cublasCreate_v2", "cublasCreate"}, Required: true},
		{Slot: slot(&cl.destroy), Names: []string{"cublasDestroy_v2", "cublasDestroy"}, Required: true},
		{Slot: slot(&cl.setStream), Names: []string{"cublasSetStream_v2", "cublasSetStream"}, Required: true},
		{Slot: slot(&cl.gemmEx), Names: []string{"cublasGemmEx"}, Required: true},
		// Optional: only for reporting the version and naming statuses.
		{Slot: slot(&cl.getVersion), Names: []string{"cublasGetVersion_v2", "cublasGetVersion"}},
		{Slot: slot(&cl.getProperty), Names: []string{"cublasGetProperty"}},
		{Slot: slot(&cl.statusName), Names: []string{"cublasGetStatusName"}},
		{Slot: slot(&cl.statusString), Names: []string{"cublasGetStatusString"}},
	})
	if err != nil {
		lib.Close()
		C.free(unsafe.Pointer(cl))
		return nil, err
	}
	// Loaded but unusable without the driver: kept loaded (dlclose of a
	// CUDA library is unsafe).
	cuda, err := dl.Open("libcuda.so.1")
	if err == nil {
		err = cuda.Bind([]dl.Sym{{Slot: slot(&cl.cuCtxSetCurrent), Names: []string{"cuCtxSetCurrent"}, Required: true}})
	}
	if err != nil {
		C.free(unsafe.Pointer(cl))
		return nil, fmt.Errorf("%s: loaded, but cuCtxSetCurrent is not available (no NVIDIA driver): %w", p, err)
	}
	return cl, nil
}

// absent is the shim's code for an optional entry point the library lacks.
const absent = -1000

// err builds an *Error for rc returned by call (rc < 0: the CUresult of
// cuCtxSetCurrent, made current just before call).
func (l *Lib) err(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	if rc == absent {
		return fmt.Errorf("cublas: %s is not in %s: %w", call, l.Path, errs.NotSupported)
	}
	if rc < 0 {
		return &Error{Call: "cuCtxSetCurrent (before " + call + ")", Code: int(-rc), CUDA: true}
	}
	e := &Error{Call: call, Code: int(rc)}
	if s := C.scb_status_string(l.c, rc); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}
