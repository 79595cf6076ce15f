package cudadrv

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/symmem/symmem/internal/errs"
)

// HaveKernels reports whether the driver can load modules and launch kernels.
func HaveKernels() bool { return Load() == nil && C.symc_have_kernels() != 0 }

// Module is a loaded (JIT-compiled) module of one context.
type Module struct {
	ctx *Context
	h   unsafe.Pointer
}

// LoadModule JIT-compiles PTX text (or loads a cubin) into ctx. A PTX error
// carries the JIT log.
func LoadModule(ctx *Context, image []byte) (*Module, error) {
	if !HaveKernels() {
		return nil, fmt.Errorf("cuda: the driver lacks module loading or kernel launch: %w", errs.NotSupported)
	}
	img := C.CBytes(append(bytes.Clone(image), 0)) // PTX must end in NUL
	defer C.free(img)
	const logLen = 4096
	log := (*C.char)(C.malloc(logLen))
	defer C.free(unsafe.Pointer(log))
	var m unsafe.Pointer
	if err := check("cuModuleLoadDataEx", C.symc_module_load(ctx.h, img, &m, log, logLen)); err != nil {
		if s := C.GoString(log); s != "" {
			return nil, fmt.Errorf("cuda: loading a module on device %d: %w; JIT log: %s", ctx.Dev, err, s)
		}
		return nil, fmt.Errorf("cuda: loading a module on device %d: %w", ctx.Dev, err)
	}
	return &Module{ctx: ctx, h: m}, nil
}

// Function looks up an entry point by name.
func (m *Module) Function(name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f unsafe.Pointer
	if err := check("cuModuleGetFunction", C.symc_module_function(m.ctx.h, m.h, cs, &f)); err != nil {
		return 0, fmt.Errorf("cuda: kernel %q: %w", name, err)
	}
	return Function(uintptr(f)), nil
}

// Unload frees the module; its functions become invalid.
func (m *Module) Unload() error { return check("cuModuleUnload", C.symc_module_unload(m.ctx.h, m.h)) }

// Function is a kernel entry point (CUfunction).
type Function uint64

// Args is a kernel's single by-value parameter block, kept in C memory so
// that the driver may read it during the launch call (it copies it there).
// Fill it with the Put methods before each launch.
type Args struct {
	p unsafe.Pointer
	b []byte
}

// NewArgs allocates an n-byte parameter block (zeroed).
func NewArgs(n int) *Args {
	p := C.calloc(C.size_t(n), 1)
	return &Args{p: p, b: unsafe.Slice((*byte)(p), n)}
}

// PutU64 stores v at byte offset off (little-endian, like the GPU).
func (a *Args) PutU64(off int, v uint64) { binary.LittleEndian.PutUint64(a.b[off:], v) }

// PutU32 stores v at byte offset off.
func (a *Args) PutU32(off int, v uint32) { binary.LittleEndian.PutUint32(a.b[off:], v) }

// Bytes is the block as the next launch will pass it (for inspection).
func (a *Args) Bytes() []byte { return a.b }

// Free releases the block.
func (a *Args) Free() {
	if a.p != nil {
		C.free(a.p)
		a.p, a.b = nil, nil
	}
}

// Launch enqueues f on stream with a 1-D grid of grid blocks of block
// threads; the parameter block is read during Exec.
func (p *Program) Launch(stream uint64, f Function, a *Args, grid, block int) {
	p.ops = append(p.ops, Op{Kind: OpLaunch, Stream: stream, A: uint64(f), B: uint64(uintptr(a.p)), C: uint64(uint32(grid)) | uint64(uint32(block))<<32})
}

// BeginCapture starts capturing stream s into a graph (relaxed mode): the
// work enqueued on it until EndCapture is recorded, not run.
func BeginCapture(ctx *Context, s *Stream) error {
	return check("cuStreamBeginCapture", C.symc_begin_capture(ctx.h, s.h))
}

// EndCapture ends the capture begun by BeginCapture and instantiates the graph.
func EndCapture(ctx *Context, s *Stream) (*Graph, error) {
	var exec unsafe.Pointer
	if err := check("cuStreamEndCapture/cuGraphInstantiate", C.symc_end_capture(ctx.h, s.h, &exec)); err != nil {
		return nil, err
	}
	return &Graph{ctx: ctx, h: exec}, nil
}

// Launch enqueues the graph on stream s.
func (g *Graph) Launch(s *Stream) error {
	p := Program{ops: []Op{{Kind: OpCtx, A: uint64(uintptr(unsafe.Pointer(g.ctx.h)))}, {Kind: OpGraph, Stream: s.Handle(), A: g.Handle()}}, batch: -1}
	return p.Exec()
}
