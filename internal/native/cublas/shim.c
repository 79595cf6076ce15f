// shim.c: dlopen/dlsym of libcublas and one wrapper per call (see shim.h).
#include "shim.h"

// scb_sym resolves the first of two names (cuBLAS exports the "_v2" entry
// points that cublas_v2.h maps the plain names to; the plain name is the
// fallback for a library that exports only it).
static void* scb_sym(void* h, const char* name, const char* alt) {
  void* p = dlsym(h, name);
  if (!p && alt) p = dlsym(h, alt);
  return p;
}

#define SCB_REQ(field, name, alt) \
  L->field = scb_sym(L->h, name, alt); \
  if (!L->field) { snprintf(err, errlen, "%s: symbol %s missing", path, name); dlclose(L->h); L->h = NULL; return -2; }

// scb_open loads path into L. 0 = ok; -1 = dlopen failed; -2 = a required
// symbol is missing; -3 = libcuda.so.1 (for cuCtxSetCurrent) is missing.
int scb_open(scb_lib* L, const char* path, char* err, size_t errlen) {
  memset(L, 0, sizeof *L);
  dlerror();
  L->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!L->h) {
    const char* e = dlerror();
    snprintf(err, errlen, "%s", e ? e : "dlopen failed");
    return -1;
  }
  SCB_REQ(create, "cublasCreate_v2", "cublasCreate");
  SCB_REQ(destroy, "cublasDestroy_v2", "cublasDestroy");
  SCB_REQ(setStream, "cublasSetStream_v2", "cublasSetStream");
  SCB_REQ(gemmEx, "cublasGemmEx", NULL);
  // Optional: only for reporting the version.
  L->getVersion = scb_sym(L->h, "cublasGetVersion_v2", "cublasGetVersion");
  L->getProperty = dlsym(L->h, "cublasGetProperty");
  L->statusName = dlsym(L->h, "cublasGetStatusName");
  L->statusString = dlsym(L->h, "cublasGetStatusString");
  L->hcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!L->hcuda) L->hcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (L->hcuda) L->cuCtxSetCurrent = dlsym(L->hcuda, "cuCtxSetCurrent");
  if (!L->cuCtxSetCurrent) {
    snprintf(err, errlen, "%s: loaded, but cuCtxSetCurrent is not available (libcuda.so.1 missing: no NVIDIA driver)", path);
    return -3;
  }
  return 0;
}

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
