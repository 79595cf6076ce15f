// Package cublas is symmem's only cgo boundary to cuBLAS, which the overlap
// benchmark uses for the GEMMs that collectives hide behind. It loads
// libcublas at run time with dlopen (no CUDA headers or link-time
// dependency; the few types and enum values it needs are declared by hand
// from cublas_api.h and library_types.h, cited where they are declared) and
// wraps what the benchmark needs:
//
//   - library: Load / Open (search order: $SYMMEM_CUBLAS_LIB, the loader's
//     libcublas.so.13 and .so.12, NVIDIA's pip wheels in site-packages
//     (nvidia/cu13/lib, nvidia/cublas/lib), the CUDA toolkit's lib64);
//   - handles: New (cublasCreate_v2), SetStream, Destroy, Version;
//   - GEMM: Handle.Gemm, cublasGemmEx with float alpha/beta and a 32-bit
//     float compute type (bf16 inputs accumulate in f32).
//
// Every call makes the caller's CUDA context current on the OS thread that
// runs it (cuCtxSetCurrent, in the same C call), so goroutine migration
// cannot leave cuBLAS on the wrong device; contexts, streams and device
// memory come from internal/native/cudadrv (or any other owner: handles are
// raw values). Every failing call is an *Error naming the call and the
// cublasStatus_t; a missing library or symbol matches errs.NotSupported and
// lists every path tried.
package cublas
