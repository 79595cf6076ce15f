// shim.h: hand-declared cuBLAS types and the C side of package cublas.
#ifndef SYMMEM_CUBLAS_SHIM_H
#define SYMMEM_CUBLAS_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Hand-declared cuBLAS types (cublas_api.h: cublasStatus_t, cublasHandle_t;
// library_types.h: cudaDataType). Enums are passed as int: C enums of these
// ranges are int-sized on every ABI CUDA supports.
typedef int scb_status;
typedef void* scb_handle;
typedef void* scb_stream;
typedef int scb_curesult;
typedef void* scb_cucontext;

// One loaded library's entry points (bound by lib.go through package dl).
typedef struct {
  // cublas_api.h: cublasStatus_t cublasCreate_v2(cublasHandle_t* handle);
  scb_status (*create)(scb_handle*);
  // cublasStatus_t cublasDestroy_v2(cublasHandle_t handle);
  scb_status (*destroy)(scb_handle);
  // cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int* version); (optional)
  scb_status (*getVersion)(scb_handle, int*);
  // cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId);
  scb_status (*setStream)(scb_handle, scb_stream);
  // cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value); (optional)
  scb_status (*getProperty)(int, int*);
  // const char* cublasGetStatusName(cublasStatus_t status);   (optional, cuBLAS 11.4.2+)
  const char* (*statusName)(scb_status);
  // const char* cublasGetStatusString(cublasStatus_t status); (optional, cuBLAS 11.4.2+)
  const char* (*statusString)(scb_status);
  // cublasStatus_t cublasGemmEx(cublasHandle_t handle,
  //     cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
  //     const void* alpha, const void* A, cudaDataType Atype, int lda,
  //     const void* B, cudaDataType Btype, int ldb, const void* beta,
  //     void* C, cudaDataType Ctype, int ldc,
  //     cublasComputeType_t computeType, cublasGemmAlgo_t algo);
  scb_status (*gemmEx)(scb_handle, int, int, int, int, int,
                       const void*, const void*, int, int,
                       const void*, int, int, const void*,
                       void*, int, int, int, int);
  // cuda.h: CUresult cuCtxSetCurrent(CUcontext ctx), from libcuda.so.1.
  scb_curesult (*cuCtxSetCurrent)(scb_cucontext);
} scb_lib;

// Return codes of the wrappers: >= 0 is a cublasStatus_t; -1000 means an
// optional entry point is absent; other values < 0 are -(CUresult) of
// cuCtxSetCurrent.
int scb_property(const scb_lib* L, int which, int* v);
const char* scb_status_name(const scb_lib* L, int rc);
const char* scb_status_string(const scb_lib* L, int rc);
int scb_create(const scb_lib* L, uintptr_t ctx, uintptr_t* out);
int scb_destroy(const scb_lib* L, uintptr_t ctx, uintptr_t h);
int scb_version(const scb_lib* L, uintptr_t ctx, uintptr_t h, int* v);
int scb_set_stream(const scb_lib* L, uintptr_t ctx, uintptr_t h, uintptr_t stream);
// scb_gemm runs cublasGemmEx with float alpha and beta (compute types
// CUBLAS_COMPUTE_32F*). ints: transa, transb, m, n, k, atype, lda, btype,
// ldb, ctype, ldc, computeType, algo.
int scb_gemm(const scb_lib* L, uintptr_t ctx, uintptr_t h, const int32_t* ints,
             float alpha, float beta, uint64_t a, uint64_t b, uint64_t c);

#endif
