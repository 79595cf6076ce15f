/* fakecuda.c: a stand-in libcuda.so.1 for tests without a GPU (built and
   loaded by fakecuda_test.go). One device with VMM and POSIX-fd handles;
   allocations and address ranges are numbers, exported handles are fds of
   /dev/null, host allocations are calloc'd, and work completes at once.

   FAKECUDA_RULES names a file of rules "name:n:code" (separated by commas or
   newlines; name as hit() below logs it, mostly the driver's symbol), read
   at every counted call: the n-th call of name (counted from the process's
   start, from 1; n=0: every call) returns code, where code -1 blocks the
   call until the rules no longer say so (it then returns what they say).
   FAKECUDA_LOG names a file where every counted call is appended as
   "name", "name FAILED" (a failed call made nothing) or, when it starts to
   block, "name BLOCKED". Both variables are read once, at load. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct { char name[64]; int count; } counts[256]; /* more than the names above */
static int ncounts;
static uintptr_t next = 0x100000;
static char rules_path[4096], log_path[4096];

__attribute__((constructor)) static void setup(void) {
  const char* r = getenv("FAKECUDA_RULES");
  const char* l = getenv("FAKECUDA_LOG");
  snprintf(rules_path, sizeof rules_path, "%s", r ? r : "");
  snprintf(log_path, sizeof log_path, "%s", l ? l : "");
}

/* rule is what the rules say of the n-th call of name (0: succeed). */
static CUresult rule(const char* name, int n) {
  char buf[4096] = {0};
  if (rules_path[0]) {
    FILE* f = fopen(rules_path, "r");
    if (f) { size_t k = fread(buf, 1, sizeof buf - 1, f); buf[k] = 0; fclose(f); }
  }
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save)) {
    char nm[64]; int k, code;
    if (sscanf(tok, " %63[^:]:%d:%d", nm, &k, &code) == 3 && strcmp(nm, name) == 0 && (k == 0 || k == n)) return code;
  }
  return 0;
}

static void logcall(const char* name, const char* what) {
  if (!log_path[0]) return;
  pthread_mutex_lock(&mu);
  FILE* f = fopen(log_path, "a");
  if (f) { fprintf(f, "%s%s\n", name, what); fclose(f); }
  pthread_mutex_unlock(&mu);
}

static CUresult hit(const char* name) {
  pthread_mutex_lock(&mu);
  int i;
  for (i = 0; i < ncounts && strcmp(counts[i].name, name); i++) {}
  if (i == ncounts) { snprintf(counts[i].name, 64, "%s", name); counts[i].count = 0; ncounts++; }
  int n = ++counts[i].count;
  pthread_mutex_unlock(&mu);
  CUresult rc = rule(name, n);
  if (rc == -1) {
    logcall(name, " BLOCKED");
    while ((rc = rule(name, n)) == -1) usleep(2000);
  }
  logcall(name, rc ? " FAILED" : "");
  return rc;
}

static uintptr_t handle(size_t size) {
  pthread_mutex_lock(&mu);
  uintptr_t h = next;
  next += (size + 0xFFFFF) & ~(uintptr_t)0xFFFFF;
  if (size == 0) next += 0x1000;
  pthread_mutex_unlock(&mu);
  return h;
}

#define SIMPLE(n) CUresult n() { return hit(#n); }

CUresult cuInit(unsigned f) { (void)f; return hit("cuInit"); }
CUresult cuDriverGetVersion(int* v) { *v = 12080; return hit("cuDriverGetVersion"); }
CUresult cuDeviceGetCount(int* n) { *n = 1; return hit("cuDeviceGetCount"); }
CUresult cuDeviceGet(int* d, int o) { *d = o; return 0; }
/* 102, 103: VMM and POSIX-fd handles; 75: compute capability major. */
CUresult cuDeviceGetAttribute(int* v, int a, int d) { (void)d; *v = (a == 102 || a == 103) ? 1 : (a == 75 ? 9 : 1); return 0; }
CUresult cuDeviceGetName(char* s, int n, int d) { (void)d; snprintf(s, n, "Fake GPU"); return 0; }
CUresult cuDeviceCanAccessPeer(int* c, int a, int b) { (void)a; (void)b; *c = 1; return 0; }
CUresult cuDeviceGetP2PAttribute(int* v, int a, int x, int y) { (void)a; (void)x; (void)y; *v = 1; return 0; }
/* A real address: Go's stack copying rejects pointer values below 4096. */
static char ctx_object[64];
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = ctx_object; return hit("cuDevicePrimaryCtxRetain"); }
SIMPLE(cuDevicePrimaryCtxRelease)
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
SIMPLE(cuCtxSynchronize)
CUresult cuGetErrorName(CUresult r, const char** s) { (void)r; *s = "FAKE_ERROR"; return 0; }
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = 1ull << 34; *t = 1ull << 35; return 0; }
CUresult cuMemHostAlloc(void** p, size_t n, unsigned f) { (void)f; CUresult r = hit("cuMemHostAlloc"); if (r) return r; *p = calloc(1, n); return 0; }
CUresult cuMemHostGetDevicePointer_v2(uintptr_t* d, void* h, unsigned f) { (void)f; *d = (uintptr_t)h; return hit("cuMemHostGetDevicePointer"); }
CUresult cuMemFreeHost(void* p) { CUresult r = hit("cuMemFreeHost"); if (!r) free(p); return r; }
SIMPLE(cuMemHostRegister_v2)
SIMPLE(cuMemHostUnregister)
CUresult cuMemGetAllocationGranularity(size_t* g, const void* p, int o) { (void)p; (void)o; *g = 2 << 20; return 0; }
CUresult cuMemCreate(uintptr_t* h, size_t n, const void* p, unsigned long long f) { (void)p; (void)f; CUresult r = hit("cuMemCreate"); if (r) return r; *h = handle(n); return 0; }
CUresult cuMemExportToShareableHandle(void* fd, uintptr_t h, int t, unsigned long long f) {
  (void)h; (void)t; (void)f;
  CUresult r = hit("cuMemExportToShareableHandle");
  if (r) return r;
  *(int*)fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return 0;
}
CUresult cuMemImportFromShareableHandle(uintptr_t* h, void* fd, int t) { (void)fd; (void)t; CUresult r = hit("cuMemImportFromShareableHandle"); if (r) return r; *h = handle(0); return 0; }
CUresult cuMemAddressReserve(uintptr_t* p, size_t n, size_t a, uintptr_t x, unsigned long long f) { (void)a; (void)x; (void)f; CUresult r = hit("cuMemAddressReserve"); if (r) return r; *p = handle(n); return 0; }
SIMPLE(cuMemAddressFree)
SIMPLE(cuMemMap)
SIMPLE(cuMemUnmap)
SIMPLE(cuMemSetAccess)
SIMPLE(cuMemRelease)
CUresult cuStreamCreateWithPriority(void** s, unsigned f, int p) { (void)f; (void)p; CUresult r = hit("cuStreamCreate"); if (r) return r; *s = (void*)handle(0); return 0; }
SIMPLE(cuStreamDestroy_v2)
SIMPLE(cuStreamSynchronize)
SIMPLE(cuStreamQuery)
CUresult cuStreamIsCapturing(void* s, int* c) { (void)s; *c = 0; return 0; }
SIMPLE(cuStreamWaitEvent)
CUresult cuEventCreate(void** e, unsigned f) { (void)f; CUresult r = hit("cuEventCreate"); if (r) return r; *e = (void*)handle(0); return 0; }
SIMPLE(cuEventDestroy_v2)
SIMPLE(cuEventRecord)
SIMPLE(cuEventQuery)
SIMPLE(cuEventSynchronize)
SIMPLE(cuEventElapsedTime_v2)
SIMPLE(cuMemcpyDtoDAsync_v2)
SIMPLE(cuMemcpyHtoD_v2)
SIMPLE(cuMemcpyDtoH_v2)
SIMPLE(cuPointerGetAttributes)
SIMPLE(cuMemsetD8_v2)
SIMPLE(cuMemsetD32_v2)
SIMPLE(cuMemsetD32Async)
SIMPLE(cuStreamWriteValue32_v2)
SIMPLE(cuStreamWaitValue32_v2)
