package cublas

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// Handle is one cuBLAS handle (cublasHandle_t) bound to one CUDA context.
// Its calls are not safe for concurrent use (cuBLAS's rule for a handle).
type Handle struct {
	l   *Lib
	ctx uint64 // raw CUcontext made current around every call
	h   C.uintptr_t

	closeOnce sync.Once
	closeErr  error
}

// New creates a handle on the device of ctx (a raw CUcontext, e.g.
// cudadrv.Context.Handle(); it must be the device's primary context, the
// one cuBLAS's runtime uses). It runs on the legacy default stream until
// SetStream.
func (l *Lib) New(ctx uint64) (*Handle, error) {
	if ctx == 0 {
		return nil, fmt.Errorf("cublas: New needs a CUDA context (got 0)")
	}
	var h C.uintptr_t
	if err := l.err("cublasCreate_v2", C.scb_create(l.c, C.uintptr_t(ctx), &h)); err != nil {
		return nil, err
	}
	return &Handle{l: l, ctx: ctx, h: h}, nil
}

// Close destroys the handle (once; later calls return the first result).
func (h *Handle) Close() error {
	h.closeOnce.Do(func() {
		h.closeErr = h.l.err("cublasDestroy_v2", C.scb_destroy(h.l.c, C.uintptr_t(h.ctx), h.h))
	})
	return h.closeErr
}

// Version is cublasGetVersion_v2, e.g. 130002 for 13.0.2.
func (h *Handle) Version() (int, error) {
	var v C.int
	if err := h.l.err("cublasGetVersion_v2", C.scb_version(h.l.c, C.uintptr_t(h.ctx), h.h, &v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetStream makes later calls run on stream (a raw CUstream; 0 is the
// legacy default stream).
func (h *Handle) SetStream(stream uint64) error {
	return h.l.err("cublasSetStream_v2", C.scb_set_stream(h.l.c, C.uintptr_t(h.ctx), h.h, C.uintptr_t(stream)))
}

// Gemm is one cublasGemmEx call: C = Alpha·op(A)·op(B) + Beta·C in cuBLAS's
// column-major convention (op(A) is M×K, op(B) is K×N, C is M×N).
type Gemm struct {
	TransA, TransB Operation
	M, N, K        int
	A, B, C        uint64 // device addresses
	LdA, LdB, LdC  int    // leading dimensions; 0 = the packed value
	AType, BType   DataType
	CType          DataType
	Compute        ComputeType // 0 = Compute32F
	Alpha, Beta    float32
}

// withDefaults fills in packed leading dimensions and the compute type.
func (g Gemm) withDefaults() Gemm {
	rowsA, rowsB := g.M, g.K
	if g.TransA == OpT {
		rowsA = g.K
	}
	if g.TransB == OpT {
		rowsB = g.N
	}
	if g.LdA == 0 {
		g.LdA = rowsA
	}
	if g.LdB == 0 {
		g.LdB = rowsB
	}
	if g.LdC == 0 {
		g.LdC = g.M
	}
	if g.Compute == 0 {
		g.Compute = Compute32F
	}
	return g
}

// Validate reports an argument cuBLAS would refuse, before any call.
func (g Gemm) Validate() error {
	g = g.withDefaults()
	rowsA, rowsB := g.M, g.K
	if g.TransA == OpT {
		rowsA = g.K
	}
	if g.TransB == OpT {
		rowsB = g.N
	}
	const maxInt = 1<<31 - 1
	switch {
	case g.M <= 0 || g.N <= 0 || g.K <= 0:
		return fmt.Errorf("cublas: GEMM %dx%dx%d: every dimension must be positive", g.M, g.N, g.K)
	case g.M > maxInt || g.N > maxInt || g.K > maxInt:
		return fmt.Errorf("cublas: GEMM %dx%dx%d: dimensions must fit a C int", g.M, g.N, g.K)
	case g.TransA != OpN && g.TransA != OpT, g.TransB != OpN && g.TransB != OpT:
		return fmt.Errorf("cublas: GEMM transpose %d/%d: want OpN or OpT", g.TransA, g.TransB)
	case g.LdA < rowsA || g.LdB < rowsB || g.LdC < g.M:
		return fmt.Errorf("cublas: GEMM leading dimensions %d/%d/%d below the rows %d/%d/%d", g.LdA, g.LdB, g.LdC, rowsA, rowsB, g.M)
	case g.A == 0 || g.B == 0 || g.C == 0:
		return fmt.Errorf("cublas: GEMM with a nil matrix (A=%#x B=%#x C=%#x)", g.A, g.B, g.C)
	case g.Compute != Compute32F && g.Compute != Compute32FPedantic:
		return fmt.Errorf("cublas: compute type %d: only CUBLAS_COMPUTE_32F (68) and _PEDANTIC (69) are offered", g.Compute)
	}
	for _, t := range []DataType{g.AType, g.BType, g.CType} {
		if t != R32F && t != R16F && t != R16BF {
			return fmt.Errorf("cublas: data type %v: want f32, f16 or bf16", t)
		}
	}
	return nil
}

// Gemm enqueues one GEMM on the handle's stream.
func (h *Handle) Gemm(g Gemm) error {
	if err := g.Validate(); err != nil {
		return err
	}
	g = g.withDefaults()
	ints := [13]C.int32_t{C.int32_t(g.TransA), C.int32_t(g.TransB), C.int32_t(g.M), C.int32_t(g.N), C.int32_t(g.K),
		C.int32_t(g.AType), C.int32_t(g.LdA), C.int32_t(g.BType), C.int32_t(g.LdB), C.int32_t(g.CType), C.int32_t(g.LdC),
		C.int32_t(g.Compute), algoDefault}
	rc := C.scb_gemm(h.l.c, C.uintptr_t(h.ctx), h.h, &ints[0], C.float(g.Alpha), C.float(g.Beta),
		C.uint64_t(g.A), C.uint64_t(g.B), C.uint64_t(g.C))
	if err := h.l.err("cublasGemmEx", rc); err != nil {
		return fmt.Errorf("%w (%dx%dx%d %v·%v→%v)", err, g.M, g.N, g.K, g.AType, g.BType, g.CType)
	}
	return nil
}
