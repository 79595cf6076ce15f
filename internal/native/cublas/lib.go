package cublas

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
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
	openMu   sync.Mutex // dlerror is not thread-safe
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
// ErrNotSupported) listing every path tried with its reason.
func Open(candidates []string) (*Lib, error) {
	openMu.Lock()
	defer openMu.Unlock()
	var tried []string
	for _, p := range candidates {
		cl := (*C.scb_lib)(C.calloc(1, C.sizeof_scb_lib))
		cp := C.CString(p)
		var errbuf [512]C.char
		rc := C.scb_open(cl, cp, &errbuf[0], C.size_t(len(errbuf)))
		C.free(unsafe.Pointer(cp))
		if rc != 0 {
			if cl.h == nil {
				C.free(unsafe.Pointer(cl))
			} // else: loaded but unusable; keep it (dlclose of a CUDA library is unsafe)
			msg := C.GoString(&errbuf[0])
			if !strings.HasPrefix(msg, p+":") {
				msg = p + ": " + msg
			}
			tried = append(tried, msg)
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

// absent is the shim's code for an optional entry point the library lacks.
const absent = -1000

// err builds an *Error for rc returned by call (rc < 0: the CUresult of
// cuCtxSetCurrent, made current just before call).
func (l *Lib) err(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	if rc == absent {
		return fmt.Errorf("cublas: %s is not in %s: %w", call, l.Path, ErrNotSupported)
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
