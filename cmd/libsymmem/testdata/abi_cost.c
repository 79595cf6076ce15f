// abi_cost: host time of symmem_all_reduce called from C, the layer between
// the Go call (BenchmarkGoAllReduce) and the Python package's ctypes call.
// World of one started by `symmem launch -n 1`; 1024 float32 (4 KiB) in
// pool memory, out of place, as in cost_test.go and python/bench.
//
//   cc -O2 -std=c11 -I include cmd/libsymmem/testdata/abi_cost.c -L .build -lsymmem
//      -Wl,-rpath,'$ORIGIN' -ldl -o .build/abi_cost        (one line)
//   .build/symmem launch -n 1 .build/abi_cost [cpu|cuda] [calls per round]
//
// Each row is timed in batches of BATCH calls; between batches (untimed)
// the GPU drains, so a row measures enqueue (host) time, never a full queue.
// Rows are interleaved batch by batch (rows()). Prints "COST <row> <best>
// <median>" in microseconds per call over ROUNDS rounds.
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symmem.h"

enum { BATCH = 200, ROUNDS = 7, COUNT = 1024 };

static symmem_world_t w;
static symmem_group_t g;
static void *in, *out;
static int (*ctx_sync)(void);  // cuCtxSynchronize, for work on CUDA's legacy stream

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void die(const char* what, int rc) {
  fprintf(stderr, "abi_cost: %s: status %d: %s\n", what, rc, symmem_last_error());
  exit(1);
}

static void drain(void) {
  int rc = symmem_synchronize(w);
  if (rc < 0) die("symmem_synchronize", rc);
  if (ctx_sync != NULL && (rc = ctx_sync()) != 0) die("cuCtxSynchronize", rc);
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

typedef struct {
  const char* name;
  int (*fn)(void*);
  void* arg;
} row_t;

// rows times every row over ROUNDS rounds of n calls and prints each one's
// best and median round. The rows are interleaved: each round times a batch
// of every row in turn, so all rows see the same machine state (load, clock,
// the driver's queues); a row timed after another in a block of its own
// can read slower or faster for reasons not its own.
static void rows(const row_t* rs, int nr, long n) {
  double r[16][ROUNDS];
  for (int j = 0; j < nr; j++) {
    for (int i = 0; i < BATCH; i++) rs[j].fn(rs[j].arg);  // warm up
  }
  drain();
  long batches = (n + BATCH - 1) / BATCH;
  for (int k = 0; k < ROUNDS; k++) {
    double sum[16] = {0};
    for (long b = 0; b < batches; b++) {
      for (int j = 0; j < nr; j++) {
        double t0 = now();
        for (int i = 0; i < BATCH; i++) {
          int rc = rs[j].fn(rs[j].arg);
          if (rc < 0) die(rs[j].name, rc);
        }
        sum[j] += now() - t0;
        drain();
      }
    }
    for (int j = 0; j < nr; j++) r[j][k] = sum[j] / (double)(batches * BATCH) / 1e3;
  }
  for (int j = 0; j < nr; j++) {
    qsort(r[j], ROUNDS, sizeof r[j][0], cmp);
    printf("COST %-52s %8.3f %8.3f\n", rs[j].name, r[j][0], r[j][ROUNDS / 2]);
  }
  fflush(stdout);
}

// spin waits GAP_NS on the clock: the host work a caller (Python) does
// between two calls, without the caller's memory traffic.
enum { GAP_NS = 3000 };
static int spin(void* arg) {
  (void)arg;
  double end = now() + GAP_NS;
  while (now() < end) {
  }
  return 0;
}

static int floor_call(void* arg) {
  (void)arg;
  return symmem_abi_version() - SYMMEM_ABI_VERSION;
}

static int all_reduce(void* stream) { return symmem_all_reduce(g, in, out, COUNT, SYMMEM_FLOAT32, SYMMEM_SUM, stream, NULL); }

static int collective(void* stream) {
  return symmem_collective(g, SYMMEM_CALL(SYMMEM_ALL_REDUCE, SYMMEM_FLOAT32, SYMMEM_SUM, SYMMEM_ALGO_AUTO, 0), in, out,
                           COUNT, stream);
}

static int spin_collective(void* stream) {
  spin(NULL);
  return collective(stream);
}

int main(int argc, char** argv) {
  const char* backend = argc > 1 ? argv[1] : "cpu";
  long n = argc > 2 ? atol(argv[2]) : 20000;
  if (n <= 0) {
    fprintf(stderr, "usage: abi_cost [cpu|cuda] [calls per round > 0]\n");
    return 2;
  }
  int rc;
  symmem_scope_t sc;
  if ((rc = symmem_init(backend, 0, 0, &w)) < 0) die("symmem_init", rc);
  if ((rc = symmem_world_group(w, &g)) < 0) die("symmem_world_group", rc);
  if ((rc = symmem_scope_open(g, &sc)) < 0) die("symmem_scope_open", rc);
  if ((rc = symmem_alloc(w, COUNT * 4, &in)) < 0) die("symmem_alloc", rc);
  if ((rc = symmem_alloc(w, COUNT * 4, &out)) < 0) die("symmem_alloc", rc);
  if ((rc = symmem_scope_end(sc)) < 0) die("symmem_scope_end", rc);
  char be[16];
  symmem_world_backend(w, be, sizeof be);
  int cuda = strcmp(be, "cuda") == 0;
  printf("COST host us/call from C: %s backend, %d float32 out of place, world of 1, best and median of %d rounds of "
         "%ld calls (batches of %d)\n", be, COUNT, ROUNDS, n, BATCH);
  void* legacy = (void*)0x1;  // CU_STREAM_LEGACY, torch's default stream
  if (cuda) {
    // The calling thread has symmem's context current after its calls.
    void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ctx_sync = cu != NULL ? (int (*)(void))dlsym(cu, "cuCtxSynchronize") : NULL;
    if (ctx_sync == NULL) {
      fprintf(stderr, "abi_cost: cuCtxSynchronize not found: %s\n", dlerror());
      return 1;
    }
  }
  // The two exports do the same work after decoding their arguments
  // (collectives.go): their rows differ by the decoding only (tens of ns).
  // The spin rows: does host time between calls (what Python spends in its
  // own work) make the call itself dearer? Gap cost = (spin + call) - spin
  // alone - call alone.
  row_t rs[] = {
      {"C: symmem_abi_version (cgo entry floor)", floor_call, NULL},
      {"C: symmem_all_reduce, stream NULL (backend's)", all_reduce, NULL},
      {"C: symmem_collective, stream NULL (backend's)", collective, NULL},
      {"C: symmem_all_reduce, stream CU_STREAM_LEGACY", all_reduce, legacy},
      {"C: symmem_collective, stream CU_STREAM_LEGACY", collective, legacy},
      {"C: 3 us spin alone", spin, NULL},
      {"C: 3 us spin + symmem_collective, CU_STREAM_LEGACY", spin_collective, legacy},
  };
  int nr = sizeof rs / sizeof rs[0];
  if (!cuda) {  // the CPU backend ignores streams: no legacy rows
    rs[3] = rs[5];
    rs[4] = (row_t){"C: 3 us spin + symmem_collective, stream NULL", spin_collective, NULL};
    nr = 5;
  }
  rows(rs, nr, n);
  char path[512];
  symmem_group_last_path(g, path, sizeof path);
  printf("COST path %s\n", path);
  if ((rc = symmem_world_close(w)) < 0) die("symmem_world_close", rc);
  return 0;
}
