// shim.c: one wrapper per cuBLAS call (see shim.h); package dl fills scb_lib.
#include "shim.h"

#define SCB_CTX(ctx) \
  if ((ctx) != 0) { scb_curesult r_ = L->cuCtxSetCurrent((scb_cucontext)(ctx)); if (r_ != 0) return -(int)r_; }

// scb_property: -1000 when cublasGetProperty is absent.
int scb_property(const scb_lib* L, int which, int* v) { return L->getProperty ? L->getProperty(which, v) : -1000; }
const char* scb_status_name(const scb_lib* L, int rc) { return L->statusName ? L->statusName(rc) : NULL; }
const char* scb_status_string(const scb_lib* L, int rc) { return L->statusString ? L->statusString(rc) : NULL; }

int scb_create(const scb_lib* L, uintptr_t ctx, uintptr_t* out) {
  SCB_CTX(ctx);
  scb_handle h = NULL;
  int rc = L->create(&h);
  *out = (uintptr_t)h;
  return rc;
}

int scb_destroy(const scb_lib* L, uintptr_t ctx, uintptr_t h) {
  SCB_CTX(ctx);
  return L->destroy((scb_handle)h);
}

int scb_version(const scb_lib* L, uintptr_t ctx, uintptr_t h, int* v) {
  if (!L->getVersion) return -1000;
  SCB_CTX(ctx);
  return L->getVersion((scb_handle)h, v);
}

int scb_set_stream(const scb_lib* L, uintptr_t ctx, uintptr_t h, uintptr_t stream) {
  SCB_CTX(ctx);
  return L->setStream((scb_handle)h, (scb_stream)stream);
}

int scb_gemm(const scb_lib* L, uintptr_t ctx, uintptr_t h, const int32_t* i,
             float alpha, float beta, uint64_t a, uint64_t b, uint64_t c) {
  SCB_CTX(ctx);
  return L->gemmEx((scb_handle)h, i[0], i[1], i[2], i[3], i[4],
                   &alpha, (const void*)(uintptr_t)a, i[5], i[6],
                   (const void*)(uintptr_t)b, i[7], i[8], &beta,
                   (void*)(uintptr_t)c, i[9], i[10], i[11], i[12]);
}
