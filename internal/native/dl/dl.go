// Package dl opens the shared libraries symmem uses at run time (the CUDA
// driver, NCCL, cuBLAS) and resolves their entry points, so the packages that
// wrap them share one loader: no link-time dependency, versioned names tried
// in order, and errors that name the library and the symbol. Where to look
// for a library is internal/native/libsearch's business.
package dl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

// dl_open opens path and, on failure, copies dlerror's text into err in the
// same C call: dlerror's state is per OS thread, and a goroutine can change
// threads between two cgo calls.
static void* dl_open(const char* path, char* err, size_t errlen) {
	dlerror();
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
	}
	return h;
}
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/symmem/symmem/internal/errs"
)

// Error says why a library, or one of its symbols, cannot be used. It
// matches errs.NotSupported: the library is not usable on this machine.
type Error struct {
	Path   string // the library as given to Open
	Symbol string // the missing required symbol; "" when Path did not load
	Reason string // the dynamic loader's message when Path did not load
}

func (e *Error) Error() string {
	switch {
	case e.Symbol != "":
		return e.Path + ": symbol " + e.Symbol + " missing"
	case strings.HasPrefix(e.Reason, e.Path+":"): // dlerror usually names the file
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

func (e *Error) Is(target error) bool { return target == errs.NotSupported }

// Lib is one opened library. It is never closed once bound: unloading a
// CUDA library while anything may still call into it is unsafe.
type Lib struct {
	Path string
	h    unsafe.Pointer
}

// Open opens path (a file name the loader searches for, or a path), binding
// every symbol now (RTLD_NOW) and keeping them out of the global namespace
// (RTLD_LOCAL). A library already loaded in the process is returned again.
func Open(path string) (*Lib, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var buf [512]C.char
	h := C.dl_open(cp, &buf[0], C.size_t(len(buf)))
	if h == nil {
		return nil, &Error{Path: path, Reason: C.GoString(&buf[0])}
	}
	return &Lib{Path: path, h: h}, nil
}

// Sym returns the address of the first of names that l exports (list a
// versioned name before its plain fallback), or nil if it exports none.
func (l *Lib) Sym(names ...string) unsafe.Pointer {
	for _, n := range names {
		cn := C.CString(n)
		p := C.dlsym(l.h, cn)
		C.free(unsafe.Pointer(cn))
		if p != nil {
			return p
		}
	}
	return nil
}

// Sym is one entry point of a shim's table: where its address goes (a
// function pointer in C memory) and the names to try.
type Sym struct {
	Slot     *unsafe.Pointer
	Names    []string // versioned first
	Required bool     // false: the slot stays nil when the library lacks it
}

// Bind resolves every entry of syms into its slot. A required symbol that l
// lacks is an *Error naming it (its first name).
func (l *Lib) Bind(syms []Sym) error {
	for _, s := range syms {
		p := l.Sym(s.Names...)
		if p == nil && s.Required {
			return &Error{Path: l.Path, Symbol: s.Names[0]}
		}
		*s.Slot = p
	}
	return nil
}

// Close unloads a library that turned out unusable (a required symbol
// missing) before anything called into it.
func (l *Lib) Close() { C.dlclose(l.h) }
