// fakecuda.c: a stand-in libcuda.so.1 with only cuCtxSetCurrent, which logs
// the context it was given (to $FAKE_CUBLAS_LOG) and fails for 0xbad.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

int cuCtxSetCurrent(void* ctx) {
  const char* p = getenv("FAKE_CUBLAS_LOG");
  FILE* f = p ? fopen(p, "a") : NULL;
  if (f) { fprintf(f, "ctx %#lx\n", (unsigned long)(uintptr_t)ctx); fclose(f); }
  return (uintptr_t)ctx == 0xbad ? 201 : 0; // CUDA_ERROR_INVALID_CONTEXT
}
