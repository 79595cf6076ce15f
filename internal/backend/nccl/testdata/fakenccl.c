/* fakenccl.c: a stand-in libnccl.so.2 for tests on machines without GPUs
   (built by fake_test.go with the C compiler cgo uses). It implements the
   entry points internal/native/libnccl resolves, for communicators of ONE
   rank over host memory: a world of one is a copy for every collective, so
   results can be checked. It refuses more than one rank (that needs real
   NCCL and GPUs). It records the last call for the test to inspect. */
#include <stdlib.h>
#include <string.h>
#include <stddef.h>

typedef int ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int nranks, rank, calls, revoked; } fakeComm;
typedef fakeComm* ncclComm_t;

static int unique;
static char last[64];

static size_t dtypeSize(int dt) {
  switch (dt) {
  case 0: case 1: return 1;          /* int8, uint8 */
  case 6: case 9: return 2;          /* half, bfloat16 */
  case 2: case 3: case 7: return 4;  /* int32, uint32, float */
  case 4: case 5: case 8: return 8;  /* int64, uint64, double */
  }
  return 0;
}

ncclResult_t ncclGetVersion(int* v) { *v = 22809; return 0; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof *id);
  id->internal[0] = (char)++unique;
  return 0;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, void* config) {
  (void)id; (void)config;
  if (nranks != 1 || rank != 0) return 4; /* ncclInvalidArgument: one rank only */
  fakeComm* c = calloc(1, sizeof *c);
  c->nranks = nranks;
  c->rank = rank;
  *comm = c;
  strcpy(last, "init");
  return 0;
}
/* As NCCL 2.28: a revoked communicator refuses finalize and collectives
 * (ncclInvalidUsage, 5) and is destroyed alone. Built with -DNO_REVOKE it
 * lacks ncclCommRevoke, as older NCCL does. */
ncclResult_t ncclCommFinalize(ncclComm_t comm) { if (comm->revoked) return 5; strcpy(last, "finalize"); return 0; }
#ifndef NO_REVOKE
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  if (flags != 0 || comm->revoked) return 4;
  comm->revoked = 1;
  strcpy(last, "revoke");
  return 0;
}
#endif
ncclResult_t ncclCommDestroy(ncclComm_t comm) { free(comm); strcpy(last, "destroy"); return 0; }
ncclResult_t ncclCommAbort(ncclComm_t comm) { free(comm); strcpy(last, "abort"); return 0; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* st) { (void)comm; *st = 0; return 0; }
const char* ncclGetErrorString(ncclResult_t r) { return r == 4 ? "invalid argument (fake NCCL: one rank only)" : "fake NCCL error"; }

static ncclResult_t copy(const char* what, ncclComm_t comm, const void* in, void* out, size_t count, int dt) {
  size_t es = dtypeSize(dt);
  if (comm == NULL) return 4;
  if (comm->revoked) return 5;
  if (es == 0) return 4;
  if (in != out && count > 0) memmove(out, in, count * es);
  comm->calls++;
  strcpy(last, what);
  return 0;
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, int dt, ncclComm_t comm, void* stream) {
  (void)stream; return copy("allgather", comm, in, out, count, dt);
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, int dt, int op, ncclComm_t comm, void* stream) {
  (void)op; (void)stream; return copy("reducescatter", comm, in, out, count, dt);
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, int dt, int op, ncclComm_t comm, void* stream) {
  (void)op; (void)stream; return copy("allreduce", comm, in, out, count, dt);
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t count, int dt, int root, ncclComm_t comm, void* stream) {
  (void)stream; if (root != 0) return 4; return copy("broadcast", comm, in, out, count, dt);
}

/* All-to-all of one rank: ncclAlltoAll is a copy (built with
 * -DNO_ALLTOALL it is missing, as before NCCL 2.28); a group of ncclSend
 * and ncclRecv to and from rank 0 pairs each receive with the pending send,
 * whose counts must match. */
#ifndef NO_ALLTOALL
ncclResult_t ncclAlltoAll(const void* in, void* out, size_t count, int dt, ncclComm_t comm, void* stream) {
  (void)stream; return copy("alltoall", comm, in, out, count, dt);
}
#endif
static int inGroup;
static const void* pendingSend;
static size_t pendingCount;
ncclResult_t ncclGroupStart(void) { if (inGroup) return 5; inGroup = 1; pendingSend = NULL; return 0; }
ncclResult_t ncclGroupEnd(void) {
  if (!inGroup) return 5;
  inGroup = 0;
  return pendingSend != NULL ? 5 : 0; /* a send no receive matched */
}
ncclResult_t ncclSend(const void* in, size_t count, int dt, int peer, ncclComm_t comm, void* stream) {
  (void)dt; (void)stream;
  if (!inGroup || peer != 0 || comm == NULL || pendingSend != NULL) return 4;
  pendingSend = in; pendingCount = count;
  return 0;
}
ncclResult_t ncclRecv(void* out, size_t count, int dt, int peer, ncclComm_t comm, void* stream) {
  if (!inGroup || peer != 0 || pendingSend == NULL || pendingCount != count) return 4;
  const void* in = pendingSend;
  pendingSend = NULL;
  return copy("sendrecv", comm, in, out, count, dt);
}

/* For the test: the last call and how many collectives a communicator ran. */
const char* fakeLastCall(void) { return last; }
