// shim.c: one wrapper per NCCL call (see shim.h); package dl fills sm_nccl.
#include "shim.h"

int sm_has(const sm_nccl* L, int what) {
  switch (what) {
  case 0: return L->winRegister != NULL && L->winDeregister != NULL;
  case 2: return L->cuCtxSetCurrent != NULL;
  case 3: return L->getLastError != NULL;
  case 4: return L->commRevoke != NULL;
  case 5: return L->allToAll != NULL;
  case 6: return L->send != NULL && L->recv != NULL && L->groupStart != NULL && L->groupEnd != NULL;
  }
  return 0;
}

// Return codes of the wrappers: >= 0 is an ncclResult_t; < 0 is -(CUresult)
// of cuCtxSetCurrent.
#define SM_CTX(ctx) \
  if ((ctx) != 0) { CUresult r_ = L->cuCtxSetCurrent((CUcontext)(ctx)); if (r_ != 0) return -(int)r_; }

int sm_version(const sm_nccl* L, int* v) { return L->getVersion(v); }
int sm_unique_id(const sm_nccl* L, void* out) { return L->getUniqueId((ncclUniqueId*)out); }
const char* sm_error_string(const sm_nccl* L, int rc) { return L->getErrorString(rc); }
const char* sm_last_error(const sm_nccl* L, uintptr_t comm) {
  return L->getLastError ? L->getLastError((ncclComm_t)comm) : NULL;
}

int sm_comm_init(const sm_nccl* L, uintptr_t ctx, uintptr_t* out, int nranks, const void* id, int rank,
                        const int32_t* ints, unsigned int version, const char* netName, const char* commName) {
  SM_CTX(ctx);
  sm_ncclConfig_t c;
  memset(&c, 0, sizeof c);
  c.size = sizeof c;
  c.magic = 0xcafebeef;
  c.version = version;
  c.blocking = ints[0]; c.cgaClusterSize = ints[1]; c.minCTAs = ints[2]; c.maxCTAs = ints[3];
  c.netName = netName;
  c.splitShare = ints[4]; c.trafficClass = ints[5];
  c.commName = commName;
  c.collnetEnable = ints[6]; c.CTAPolicy = ints[7]; c.shrinkShare = ints[8]; c.nvlsCTAs = ints[9];
  c.nChannelsPerNetPeer = ints[10]; c.nvlinkCentricSched = ints[11];
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclComm_t comm = NULL;
  int rc = L->commInitRankConfig(&comm, nranks, uid, rank, &c);
  *out = (uintptr_t)comm;
  return rc;
}

int sm_async_error(const sm_nccl* L, uintptr_t comm, int* state) {
  ncclResult_t s = 0;
  int rc = L->commGetAsyncError((ncclComm_t)comm, &s);
  *state = s;
  return rc;
}
int sm_finalize(const sm_nccl* L, uintptr_t ctx, uintptr_t comm) { SM_CTX(ctx); return L->commFinalize((ncclComm_t)comm); }
int sm_destroy(const sm_nccl* L, uintptr_t ctx, uintptr_t comm) { SM_CTX(ctx); return L->commDestroy((ncclComm_t)comm); }
int sm_abort(const sm_nccl* L, uintptr_t ctx, uintptr_t comm) { SM_CTX(ctx); return L->commAbort((ncclComm_t)comm); }
int sm_revoke(const sm_nccl* L, uintptr_t ctx, uintptr_t comm) { SM_CTX(ctx); return L->commRevoke((ncclComm_t)comm, 0); }

int sm_all_gather(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt,
                         uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  return L->allGather((const void*)send, (void*)recv, count, dt, (ncclComm_t)comm, (sm_stream_t)stream);
}
int sm_reduce_scatter(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt,
                             int op, uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  return L->reduceScatter((const void*)send, (void*)recv, count, dt, op, (ncclComm_t)comm, (sm_stream_t)stream);
}
int sm_all_reduce(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt,
                         int op, uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  return L->allReduce((const void*)send, (void*)recv, count, dt, op, (ncclComm_t)comm, (sm_stream_t)stream);
}
int sm_broadcast(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt,
                        int root, uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  return L->broadcast((const void*)send, (void*)recv, count, dt, root, (ncclComm_t)comm, (sm_stream_t)stream);
}

int sm_all_to_all(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt,
                  uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  return L->allToAll((const void*)send, (void*)recv, count, dt, (ncclComm_t)comm, (sm_stream_t)stream);
}
// sm_all_to_all_v sends sendCounts[j] elements at send[j] to rank j and
// receives recvCounts[i] at recv[i] from rank i, as one NCCL group; a zero
// count is skipped (its peer skips the matching call). The group is always
// ended, so a failed send or receive leaves no group open; the first error
// is returned.
int sm_all_to_all_v(const sm_nccl* L, uintptr_t ctx, const uint64_t* send, const size_t* sendCounts,
                    const uint64_t* recv, const size_t* recvCounts, int n, int dt, uintptr_t comm, uintptr_t stream) {
  SM_CTX(ctx);
  int rc = L->groupStart();
  if (rc != 0) return rc;
  for (int j = 0; j < n && rc == 0; j++) {
    if (sendCounts[j] > 0) rc = L->send((const void*)send[j], sendCounts[j], dt, j, (ncclComm_t)comm, (sm_stream_t)stream);
    if (rc == 0 && recvCounts[j] > 0) rc = L->recv((void*)recv[j], recvCounts[j], dt, j, (ncclComm_t)comm, (sm_stream_t)stream);
  }
  int end = L->groupEnd();
  return rc != 0 ? rc : end;
}

int sm_win_register(const sm_nccl* L, uintptr_t ctx, uintptr_t comm, uint64_t ptr, size_t size,
                           uintptr_t* win, int flags) {
  // win must be C memory that outlives the call: on a non-blocking
  // communicator NCCL fills it in when the registration completes.
  SM_CTX(ctx);
  return L->winRegister((ncclComm_t)comm, (void*)ptr, size, (ncclWindow_t*)win, flags);
}
int sm_win_deregister(const sm_nccl* L, uintptr_t ctx, uintptr_t comm, uintptr_t win) {
  SM_CTX(ctx);
  return L->winDeregister((ncclComm_t)comm, (ncclWindow_t)win);
}
// sm_config_layout reports sizeof and offsetof for the hand-declared types.
void sm_config_layout(size_t* o) {
  o[0] = sizeof(sm_ncclConfig_t);
  o[1] = offsetof(sm_ncclConfig_t, magic);
  o[2] = offsetof(sm_ncclConfig_t, version);
  o[3] = offsetof(sm_ncclConfig_t, blocking);
  o[4] = offsetof(sm_ncclConfig_t, cgaClusterSize);
  o[5] = offsetof(sm_ncclConfig_t, minCTAs);
  o[6] = offsetof(sm_ncclConfig_t, maxCTAs);
  o[7] = offsetof(sm_ncclConfig_t, netName);
  o[8] = offsetof(sm_ncclConfig_t, splitShare);
  o[9] = offsetof(sm_ncclConfig_t, trafficClass);
  o[10] = offsetof(sm_ncclConfig_t, commName);
  o[11] = offsetof(sm_ncclConfig_t, collnetEnable);
  o[12] = offsetof(sm_ncclConfig_t, CTAPolicy);
  o[13] = offsetof(sm_ncclConfig_t, shrinkShare);
  o[14] = offsetof(sm_ncclConfig_t, nvlsCTAs);
  o[15] = offsetof(sm_ncclConfig_t, nChannelsPerNetPeer);
  o[16] = offsetof(sm_ncclConfig_t, nvlinkCentricSched);
  o[17] = sizeof(ncclUniqueId);
}
