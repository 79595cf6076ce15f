// shim.h: hand-declared NCCL types and the C side of package nccl.
#ifndef SYMMEM_NCCL_SHIM_H
#define SYMMEM_NCCL_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Hand-declared NCCL types (nccl.h of NCCL 2.28.3; checked by layout_test.go).
typedef int ncclResult_t;
typedef void* ncclComm_t;
typedef void* ncclWindow_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} sm_ncclConfig_t;
typedef int CUresult;
typedef void* CUcontext;
typedef void* sm_stream_t;

// One loaded library's entry points (bound by lib.go through package dl).
typedef struct {
  ncclResult_t (*getVersion)(int*);
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, sm_ncclConfig_t*);
  ncclResult_t (*commFinalize)(ncclComm_t);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t*);
  const char*  (*getErrorString)(ncclResult_t);
  const char*  (*getLastError)(ncclComm_t);   // optional (2.13+)
  ncclResult_t (*allGather)(const void*, void*, size_t, int, ncclComm_t, sm_stream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, sm_stream_t);
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, sm_stream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, int, int, ncclComm_t, sm_stream_t);
  ncclResult_t (*winRegister)(ncclComm_t, void*, size_t, ncclWindow_t*, int);   // optional (2.27+)
  ncclResult_t (*winDeregister)(ncclComm_t, ncclWindow_t);                      // optional (2.27+)
  ncclResult_t (*commRevoke)(ncclComm_t, int);                                  // optional (2.28+)
  ncclResult_t (*allToAll)(const void*, void*, size_t, int, ncclComm_t, sm_stream_t); // optional (2.28+)
  ncclResult_t (*send)(const void*, size_t, int, int, ncclComm_t, sm_stream_t);       // optional (2.7+)
  ncclResult_t (*recv)(void*, size_t, int, int, ncclComm_t, sm_stream_t);             // optional (2.7+)
  ncclResult_t (*groupStart)(void);                                                   // optional
  ncclResult_t (*groupEnd)(void);                                                     // optional
  CUresult (*cuCtxSetCurrent)(CUcontext);                                       // from libcuda.so.1
} sm_nccl;


int sm_has(const sm_nccl* L, int what);
int sm_version(const sm_nccl* L, int* v);
int sm_unique_id(const sm_nccl* L, void* out);
const char* sm_error_string(const sm_nccl* L, int rc);
const char* sm_last_error(const sm_nccl* L, uintptr_t comm);
int sm_comm_init(const sm_nccl* L, uintptr_t ctx, uintptr_t* out, int nranks, const void* id, int rank, const int32_t* ints, unsigned int version, const char* netName, const char* commName);
int sm_async_error(const sm_nccl* L, uintptr_t comm, int* state);
int sm_finalize(const sm_nccl* L, uintptr_t ctx, uintptr_t comm);
int sm_destroy(const sm_nccl* L, uintptr_t ctx, uintptr_t comm);
int sm_abort(const sm_nccl* L, uintptr_t ctx, uintptr_t comm);
int sm_revoke(const sm_nccl* L, uintptr_t ctx, uintptr_t comm);
int sm_all_gather(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt, uintptr_t comm, uintptr_t stream);
int sm_reduce_scatter(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream);
int sm_all_reduce(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream);
int sm_broadcast(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt, int root, uintptr_t comm, uintptr_t stream);
int sm_all_to_all(const sm_nccl* L, uintptr_t ctx, uint64_t send, uint64_t recv, size_t count, int dt, uintptr_t comm, uintptr_t stream);
int sm_all_to_all_v(const sm_nccl* L, uintptr_t ctx, const uint64_t* send, const size_t* sendCounts, const uint64_t* recv, const size_t* recvCounts, int n, int dt, uintptr_t comm, uintptr_t stream);
int sm_win_register(const sm_nccl* L, uintptr_t ctx, uintptr_t comm, uint64_t ptr, size_t size, uintptr_t* win, int flags);
int sm_win_deregister(const sm_nccl* L, uintptr_t ctx, uintptr_t comm, uintptr_t win);
void sm_config_layout(size_t* o);

#endif
