// fakecublas.c: a stand-in libcublas for tests without a GPU. Every entry
// point the loader needs exists with cuBLAS's C signature (cublas_api.h);
// each call appends one line describing its arguments to the file named by
// $FAKE_CUBLAS_LOG, so a test can check what the Go side passed.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void logf_(const char* fmt, ...) {
  const char* p = getenv("FAKE_CUBLAS_LOG");
  if (!p) return;
  FILE* f = fopen(p, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

static int handle_storage;

int cublasCreate_v2(void** h) { *h = &handle_storage; logf_("create"); return 0; }
int cublasDestroy_v2(void* h) { logf_("destroy ok=%d", h == &handle_storage); return 0; }
int cublasSetStream_v2(void* h, void* s) { logf_("stream ok=%d s=%#lx", h == &handle_storage, (unsigned long)(uintptr_t)s); return 0; }
int cublasGetVersion_v2(void* h, int* v) { *v = 130102; return 0; }
int cublasGetProperty(int which, int* v) { static const int ver[3] = {13, 1, 2}; *v = ver[which]; return 0; }
const char* cublasGetStatusString(int s) { return s == 7 ? "an invalid value was used as an argument" : "other"; }
int cublasGemmEx(void* h, int ta, int tb, int m, int n, int k, const void* alpha,
                 const void* A, int at, int lda, const void* B, int bt, int ldb,
                 const void* beta, void* C, int ct, int ldc, int compute, int algo) {
  logf_("gemm ok=%d ta=%d tb=%d m=%d n=%d k=%d alpha=%g A=%#lx at=%d lda=%d B=%#lx bt=%d ldb=%d beta=%g C=%#lx ct=%d ldc=%d compute=%d algo=%d",
        h == &handle_storage, ta, tb, m, n, k, (double)*(const float*)alpha, (unsigned long)(uintptr_t)A, at, lda,
        (unsigned long)(uintptr_t)B, bt, ldb, (double)*(const float*)beta, (unsigned long)(uintptr_t)C, ct, ldc, compute, algo);
  return m == 13 ? 7 : 0; // CUBLAS_STATUS_INVALID_VALUE on request
}
