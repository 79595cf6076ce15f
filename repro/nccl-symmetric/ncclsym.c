// ncclsym: checks NCCL's symmetric (window-registered) collectives against
// exact expectations, using libnccl and the CUDA runtime alone (no symmem),
// for an upstream report. One thread per visible GPU, one communicator per
// thread (as one process per GPU would have), buffers from ncclMemAlloc
// registered as one window per rank with NCCL_WIN_COLL_SYMMETRIC.
//
// Inputs are small integers (|v| <= 8), exact in every dtype, so every
// correct sum is exact and any difference is a wrong element, not rounding.
// Each case gets fresh data; inputs are copied synchronously before the
// collective and the output is read back after a stream synchronize.
//
// Build (on a host with CUDA and an NCCL >= 2.27 library):
//   cc -O2 -std=gnu11 -pthread ncclsym.c -I$CUDA/include -L$CUDA/lib64 -lcudart
//      -L$NCCL_LIB -l:libnccl.so.2 -Wl,-rpath,$NCCL_LIB -o ncclsym   (build.sh does it)
// Run:
//   NCCL_NVLS_ENABLE=0 ./ncclsym check [lo hi]   every op x dtype x placement, counts lo..hi per rank
//   NCCL_NVLS_ENABLE=0 ./ncclsym time COUNT...   reduce-scatter bf16 time per call, window vs plain
// The NCCL declarations are written out below (the subset used), so no
// nccl.h is needed; they match nccl.h of 2.27-2.32.
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow* ncclWindow_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
enum { ncclInt8 = 0, ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum { ncclSum = 0 };
#define NCCL_WIN_COLL_SYMMETRIC 0x01
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
const char* ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int flags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t recvcount, int dt, int op, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclAllGather(const void* s, void* r, size_t sendcount, int dt, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, ncclComm_t c, cudaStream_t st);
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, int dt, int root, ncclComm_t c, cudaStream_t st);

#define CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define NCCL(x) do { ncclResult_t r_ = (x); if (r_ != 0) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); exit(1); } } while (0)

enum { OP_RS, OP_AG, OP_AR, OP_BC, NOPS };
static const char* opName[] = {"reduce_scatter", "all_gather", "all_reduce", "broadcast"};
enum { T_BF16, T_F16, T_F32, T_I8, NTYPES };
static const char* typeName[] = {"bfloat16", "float16", "float32", "int8"};
static const int typeSize[] = {2, 2, 4, 1};
static const int typeNCCL[] = {ncclBfloat16, ncclFloat16, ncclFloat32, ncclInt8};

#define BUF (80u << 20) // per rank: the largest case is n x hi elements x 4 B
static int nranks;
static ncclUniqueId uid;
static pthread_barrier_t bar;

// Small integers encoded exactly.
static uint16_t toBF16(float v) { uint32_t u; memcpy(&u, &v, 4); return (uint16_t)(u >> 16); }
static uint16_t toF16(int v) {
  if (v == 0) return 0;
  uint16_t s = v < 0 ? 0x8000 : 0; unsigned a = v < 0 ? -v : v; int e = 31 - __builtin_clz(a);
  return s | (uint16_t)((e + 15) << 10) | (uint16_t)(((a << (10 - e)) & 0x3ff));
}
static void put(int t, void* p, size_t i, int v) {
  switch (t) {
  case T_BF16: ((uint16_t*)p)[i] = toBF16((float)v); break;
  case T_F16: ((uint16_t*)p)[i] = toF16(v); break;
  case T_F32: ((float*)p)[i] = (float)v; break;
  default: ((int8_t*)p)[i] = (int8_t)v;
  }
}
static int same(int t, const void* p, size_t i, int v) {
  switch (t) {
  case T_BF16: case T_F16: { uint16_t want = t == T_BF16 ? toBF16((float)v) : toF16(v), got = ((const uint16_t*)p)[i];
    return got == want || ((got | want) & 0x7fff) == 0; }
  case T_F32: return ((const float*)p)[i] == (float)v;
  default: return ((const int8_t*)p)[i] == (int8_t)v;
  }
}
// value of element i of rank r's input in case k
static int val(unsigned k, int r, size_t i) { return (int)((i * 2654435761u + r * 40503u + k * 97u) % 17u) - 8; }

typedef struct { int rank; long lo, hi; int mode; long* counts; int ncounts; long wrong[NOPS][NTYPES][2]; long cases; } job;

static void* worker(void* arg) {
  job* j = arg;
  int r = j->rank, n = nranks;
  CUDA(cudaSetDevice(r));
  ncclComm_t win, plain;
  NCCL(ncclCommInitRank(&win, n, uid, r));
  pthread_barrier_wait(&bar);
  if (r == 0) NCCL(ncclGetUniqueId(&uid));
  pthread_barrier_wait(&bar);
  NCCL(ncclCommInitRank(&plain, n, uid, r));
  void *wbuf, *wout, *pbuf, *pout;
  NCCL(ncclMemAlloc(&wbuf, BUF));
  NCCL(ncclMemAlloc(&wout, BUF));
  CUDA(cudaMalloc(&pbuf, BUF));
  CUDA(cudaMalloc(&pout, BUF));
  ncclWindow_t w1, w2;
  NCCL(ncclCommWindowRegister(win, wbuf, BUF, &w1, NCCL_WIN_COLL_SYMMETRIC));
  NCCL(ncclCommWindowRegister(win, wout, BUF, &w2, NCCL_WIN_COLL_SYMMETRIC));
  cudaStream_t s;
  CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // NCCLSYM_OFFSET: bytes from the window heads to the buffers (symmem's
  // pool blocks sit at offsets inside registered segments).
  size_t off = getenv("NCCLSYM_OFFSET") ? (size_t)atol(getenv("NCCLSYM_OFFSET")) : 0;
  char* host = malloc(BUF);
  char* back = malloc(BUF);
  if (j->mode == 0) {
    unsigned k = 0;
    for (long c = j->lo; c <= j->hi; c = c < 8192 ? c + 1 : c * 2 + 1)
      for (int op = 0; op < NOPS; op++)
        for (int t = 0; t < NTYPES; t++)
          for (int inplace = 0; inplace < 2; inplace++) {
            if ((op == OP_RS || op == OP_AR) && t == T_I8) continue; // symmetric reductions: 16/32-bit floats
            int ts = typeSize[t];
            if (off % ts) continue; // elements stay aligned to their size
            k++;
            size_t inN = op == OP_RS ? (size_t)c * n : (size_t)c, outN = op == OP_AG ? (size_t)c * n : (size_t)c;
            for (size_t i = 0; i < inN; i++) put(t, host, i, val(k, r, op == OP_AG ? i + (size_t)r * c : i));
            // In-place: the input is the rank's chunk of the output (AG) or the output itself.
            char* in = (char*)wbuf + off;
            char* out = inplace ? in : (char*)wout + off;
            if (inplace && op == OP_AG) in += (size_t)r * c * ts;
            CUDA(cudaMemcpy(in, host, inN * ts, cudaMemcpyHostToDevice));
            if (inplace && op == OP_RS) out += (size_t)r * c * ts;
            CUDA(cudaDeviceSynchronize());
            pthread_barrier_wait(&bar);
            switch (op) {
            case OP_RS: NCCL(ncclReduceScatter(in, out, c, typeNCCL[t], ncclSum, win, s)); break;
            case OP_AG: NCCL(ncclAllGather(in, out, c, typeNCCL[t], win, s)); break;
            case OP_AR: NCCL(ncclAllReduce(in, out, c, typeNCCL[t], ncclSum, win, s)); break;
            default: NCCL(ncclBroadcast(in, out, c, typeNCCL[t], 0, win, s));
            }
            CUDA(cudaStreamSynchronize(s));
            CUDA(cudaMemcpy(back, out, outN * ts, cudaMemcpyDeviceToHost));
            long bad = 0, first = -1;
            for (size_t i = 0; i < outN; i++) {
              int want = 0;
              if (op == OP_AG) want = val(k, (int)(i / c), i);
              else if (op == OP_BC) want = val(k, 0, i);
              else for (int q = 0; q < n; q++) want += val(k, q, op == OP_RS ? i + (size_t)r * c : i);
              if (!same(t, back, i, want)) { if (first < 0) first = (long)i; bad++; }
            }
            j->cases++;
            j->wrong[op][t][inplace] += bad != 0;
            if (bad) printf("WRONG rank %d %s %s %s count=%ld (%ld B per rank): %ld of %zu elements wrong, first at %ld\n", r,
                            opName[op], typeName[t], inplace ? "in-place" : "out-of-place", c, c * ts, bad, outN, first);
            pthread_barrier_wait(&bar); // nobody's next input lands before everyone read this output
          }
  } else {
    // Timing: reduce-scatter bf16 out of place, window vs plain, per count.
    cudaEvent_t e0, e1;
    CUDA(cudaEventCreate(&e0));
    CUDA(cudaEventCreate(&e1));
    for (int ci = 0; ci < j->ncounts; ci++) {
      long c = j->counts[ci];
      for (int v = 0; v < 2; v++) {
        void *in = v ? pbuf : wbuf, *out = v ? pout : wout;
        ncclComm_t cm = v ? plain : win;
        for (size_t i = 0; i < (size_t)c * n; i++) put(T_BF16, host, i, val(7, r, i));
        CUDA(cudaMemcpy(in, host, (size_t)c * n * 2, cudaMemcpyHostToDevice));
        pthread_barrier_wait(&bar);
        for (int it = 0; it < 20; it++) NCCL(ncclReduceScatter(in, out, c, ncclBfloat16, ncclSum, cm, s));
        CUDA(cudaStreamSynchronize(s));
        pthread_barrier_wait(&bar);
        const int iters = 200;
        CUDA(cudaEventRecord(e0, s));
        for (int it = 0; it < iters; it++) NCCL(ncclReduceScatter(in, out, c, ncclBfloat16, ncclSum, cm, s));
        CUDA(cudaEventRecord(e1, s));
        CUDA(cudaEventSynchronize(e1));
        float ms;
        CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (r == 0) printf("time reduce_scatter bfloat16 count=%ld (%ld B per rank) %s: %.2f us\n", c, c * 2, v ? "plain" : "window", ms * 1000 / iters);
      }
    }
  }
  pthread_barrier_wait(&bar);
  NCCL(ncclCommWindowDeregister(win, w1));
  NCCL(ncclCommWindowDeregister(win, w2));
  NCCL(ncclMemFree(wbuf));
  NCCL(ncclMemFree(wout));
  CUDA(cudaFree(pbuf));
  CUDA(cudaFree(pout));
  NCCL(ncclCommDestroy(win));
  NCCL(ncclCommDestroy(plain));
  free(host);
  free(back);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "check") && strcmp(argv[1], "time"))) {
    fprintf(stderr, "usage: %s check [lo hi] | time COUNT...\n", argv[0]);
    return 2;
  }
  CUDA(cudaGetDeviceCount(&nranks));
  int v;
  NCCL(ncclGetVersion(&v));
  printf("NCCL %d, %d GPUs, NCCL_NVLS_ENABLE=%s, NCCLSYM_OFFSET=%s\n", v, nranks,
         getenv("NCCL_NVLS_ENABLE") ? getenv("NCCL_NVLS_ENABLE") : "unset", getenv("NCCLSYM_OFFSET") ? getenv("NCCLSYM_OFFSET") : "0");
  if (nranks < 2) { fprintf(stderr, "need 2 or more GPUs\n"); return 2; }
  job* jobs = calloc(nranks, sizeof(job));
  long lo = 1, hi = 4100, counts[64];
  int mode = strcmp(argv[1], "check") != 0, nc = 0;
  if (!mode && argc >= 4) { lo = atol(argv[2]); hi = atol(argv[3]); }
  for (int i = 2; mode && i < argc && nc < 64; i++) counts[nc++] = atol(argv[i]);
  if (hi * 4 * nranks + (1 << 20) > (long)BUF) { fprintf(stderr, "hi too large for the buffers\n"); return 2; }
  NCCL(ncclGetUniqueId(&uid));
  pthread_barrier_init(&bar, NULL, nranks);
  pthread_t th[64];
  for (int r = 0; r < nranks; r++) {
    jobs[r] = (job){.rank = r, .lo = lo, .hi = hi, .mode = mode, .counts = counts, .ncounts = nc};
    pthread_create(&th[r], NULL, worker, &jobs[r]);
  }
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  if (!mode) {
    printf("summary (%d ranks, counts %ld..%ld per rank, %ld cases per rank): cases with a wrong element on any rank\n", nranks, lo, hi, jobs[0].cases);
    for (int op = 0; op < NOPS; op++)
      for (int t = 0; t < NTYPES; t++)
        for (int ip = 0; ip < 2; ip++) {
          if ((op == OP_RS || op == OP_AR) && t == T_I8) continue;
          long w = 0;
          for (int r = 0; r < nranks; r++) w = jobs[r].wrong[op][t][ip] > w ? jobs[r].wrong[op][t][ip] : w;
          printf("  %-15s %-9s %-12s %ld\n", opName[op], typeName[t], ip ? "in-place" : "out-of-place", w);
        }
  }
  return 0;
}
