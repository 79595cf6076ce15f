/*
 * symmem.h: the C ABI of libsymmem.so, symmetric-memory collectives.
 *
 * Build the library with
 *     go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
 * (the .h file go writes next to it is cgo's own; this header is the stable one).
 *
 * Conventions
 *  - Every function returning int returns SYMMEM_OK (0) or a value >= 0 on
 *    success and a negative symmem_status on failure; symmem_last_error() then
 *    holds the message (per thread, valid until the next failing call on the
 *    thread).
 *  - Worlds, groups and scopes are opaque 64-bit handles (0 is never valid).
 *  - Buffers are addresses: host memory on the CPU backend, device memory on
 *    the CUDA backend (of this rank's GPU, symmem_world_device: other
 *    memory fails with SYMMEM_ERR_INVALID). Streams are CUstream /
 *    cudaStream_t passed as void* (NULL: the backend's own stream, which is
 *    not ordered after work on CUDA's legacy default stream: pass
 *    CU_STREAM_LEGACY, (void*)0x1, for that stream; the allocator hooks read
 *    NULL as the legacy stream, as PyTorch means it; the CPU backend ignores
 *    streams).
 *  - dtype and reduction values are NCCL's (ncclDataType_t, ncclRedOp_t).
 *  - Collective calls return a path code (>= 0, see SYMMEM_PATH_*) saying how
 *    the call ran; symmem_group_last_path gives the reason as JSON.
 *  - Collective, group and scope calls are collective over the group (or the
 *    world for group creation and close): every rank makes the same calls in
 *    the same order. Mismatches and dead peers fail with an error, bounded by
 *    the init timeout.
 */
#ifndef SYMMEM_H
#define SYMMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYMMEM_ABI_VERSION 4

typedef uint64_t symmem_world_t;
typedef uint64_t symmem_group_t;
typedef uint64_t symmem_scope_t;

/* Status codes (negative: failure). */
typedef enum {
  SYMMEM_OK = 0,
  SYMMEM_ERR_INVALID = -1,       /* bad argument; nothing changed */
  SYMMEM_ERR_NOT_SUPPORTED = -2, /* dtype, op, algorithm or backend not available */
  SYMMEM_ERR_NOT_MEMBER = -3,    /* this rank is not in the group */
  SYMMEM_ERR_MISMATCH = -4,      /* ranks passed different arguments */
  SYMMEM_ERR_CLOSED = -5,        /* world or group closed */
  SYMMEM_ERR_TIMEOUT = -6,       /* a wait ran past the timeout */
  SYMMEM_ERR_PEER = -7,          /* a peer rank exited, closed or failed */
  SYMMEM_ERR_BAD_HANDLE = -8,    /* unknown or wrong kind of handle */
  SYMMEM_ERR_INTERNAL = -9,      /* anything else; see the message */
  SYMMEM_ERR_NO_MEMORY = -10     /* not enough memory left (host, or the GPU's free memory): free some or
                                    ask for less (libraries before this code returned SYMMEM_ERR_INTERNAL) */
} symmem_status;

/* Data types: ncclDataType_t values. */
typedef enum {
  SYMMEM_INT8 = 0,
  SYMMEM_UINT8 = 1,
  SYMMEM_INT32 = 2,
  SYMMEM_UINT32 = 3, /* not supported */
  SYMMEM_INT64 = 4,
  SYMMEM_UINT64 = 5, /* not supported */
  SYMMEM_FLOAT16 = 6,
  SYMMEM_FLOAT32 = 7,
  SYMMEM_FLOAT64 = 8,
  SYMMEM_BFLOAT16 = 9
} symmem_dtype;

/* Reductions: ncclRedOp_t values. */
typedef enum {
  SYMMEM_SUM = 0,
  SYMMEM_PROD = 1, /* not supported */
  SYMMEM_MAX = 2,
  SYMMEM_MIN = 3,
  SYMMEM_AVG = 4
} symmem_redop;

/* Collective kinds (symmem_explain). */
typedef enum {
  SYMMEM_ALL_GATHER = 0,
  SYMMEM_REDUCE_SCATTER = 1,
  SYMMEM_ALL_REDUCE = 2,
  SYMMEM_BROADCAST = 3,
  SYMMEM_ALL_TO_ALL = 4 /* ABI version 4 */
} symmem_kind;

/* Path codes returned by collectives: an algorithm, plus SYMMEM_PATH_STAGED
 * when ordinary memory was staged through the pool (code & ~SYMMEM_PATH_STAGED
 * is the algorithm; codes past 7 skip the staged bit). */
#define SYMMEM_PATH_DIRECT 0      /* CPU: peers read each other's memory */
#define SYMMEM_PATH_NCCL 1        /* plain NCCL */
#define SYMMEM_PATH_NCCL_WINDOW 2 /* NCCL on registered windows */
#define SYMMEM_PATH_CE 3          /* copy engines */
#define SYMMEM_PATH_KERNEL 4      /* symmem's own kernel */
#define SYMMEM_PATH_TWO_SHOT 5    /* all-reduce: symmem's reduce-scatter kernel, then its all-gather kernel */
#define SYMMEM_PATH_LC 6          /* low contention: copy engines move, a few CTAs reduce */
#define SYMMEM_PATH_LL 7          /* low latency: symmem's small-message kernel, data and flag in one store */
#define SYMMEM_PATH_STAGED 8      /* flag */
#define SYMMEM_PATH_HIER 16       /* across hosts: symmem's paths within each host, NCCL between them */

/* symmem_init flags. */
#define SYMMEM_INIT_CHECKED 1 /* every collective verifies its arguments across ranks */

/* Errors and version. */
const char* symmem_last_error(void);
int symmem_abi_version(void);

/* Worlds. backend: "auto", "cpu", "cuda" or NULL (auto). timeout_ms: bound on
 * every wait, 0 for the default (60 s), at most 9223372036854 (INT64_MAX ns).
 * symmem_init reads the job environment (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, SYMMEM_TOKEN, SYMMEM_JOB_ID:
 * `symmem launch`; or torchrun's variables) as it is at the call (setenv
 * after the process started counts); no other thread may change the
 * environment meanwhile (see symmem_sync_env).
 * symmem_init_explicit takes the same description as arguments (token or
 * job_id NULL: from the environment as symmem_init takes them, SYMMEM_TOKEN
 * or under torchrun derived from TORCHELASTIC_RUN_ID and the master address
 * and port; SYMMEM_JOB_ID or derived from the token); rank 0 hosts symmem's
 * store on master_port+1 (master_port stays free for torch). */
int symmem_init(const char* backend, int64_t timeout_ms, int flags, symmem_world_t* world);
int symmem_init_explicit(int rank, int world_size, int local_rank, int local_world_size,
                         const char* master_addr, int master_port, const char* token, const char* job_id,
                         const char* backend, int64_t timeout_ms, int flags, symmem_world_t* world);
/* Copies the process's environment for the next symmem_init*, which then
 * does not read it itself: for callers whose other threads may change the
 * environment, called holding the lock that orders those changes (Python:
 * under the GIL, which ctypes releases during symmem_init). */
void symmem_sync_env(void);
int symmem_world_close(symmem_world_t world);
int symmem_world_rank(symmem_world_t world);
int symmem_world_size(symmem_world_t world);
/* Writes the backend name ("cpu" or "cuda"); returns its length (like snprintf). */
int symmem_world_backend(symmem_world_t world, char* buf, size_t cap);
/* Writes this rank's GPU (its CUDA ordinal), or -1 on the CPU backend.
 * (ABI version 3 added this call.) */
int symmem_world_device(symmem_world_t world, int* device);
/* Waits for calls made without a stream (GPU backend). */
int symmem_synchronize(symmem_world_t world);

/* Groups. symmem_group_new and symmem_group_close are collective over the world. */
int symmem_world_group(symmem_world_t world, symmem_group_t* group);
int symmem_group_new(symmem_world_t world, const char* name, const int* ranks, int nranks, symmem_group_t* group);
int symmem_group_close(symmem_group_t group);
int symmem_group_rank(symmem_group_t group); /* -1 on a non-member */
int symmem_group_size(symmem_group_t group);

/* Scopes: memory allocated while a scope of the group is open is registered
 * with the group when the scope ends (collective over the group). */
int symmem_scope_open(symmem_group_t group, symmem_scope_t* scope);
int symmem_scope_end(symmem_scope_t scope);

/* Memory. Allocation is local (same sizes in the same order on every rank);
 * registration happens at a scope's end. stream: the last stream the buffer
 * was used on (NULL: the backend's). */
int symmem_alloc(symmem_world_t world, size_t bytes, void** ptr);
int symmem_free(symmem_world_t world, void* ptr, void* stream);
/* 1 when [ptr, ptr+bytes) lies in one live pool block registered with the group, else 0. */
int symmem_is_symmetric(symmem_group_t group, const void* ptr, size_t bytes);

/* PyTorch CUDAPluggableAllocator hooks, on the most recently initialised
 * world still open (CUDA backend). No collective work: register with a scope.
 * symmem_torch_alloc returns NULL (symmem_last_error says why) for a device
 * other than the world's GPU. */
void* symmem_torch_alloc(size_t size, int device, void* stream);
void symmem_torch_free(void* ptr, size_t size, int device, void* stream);

/* Collectives, NCCL-like. count: elements per rank for all-gather (in holds
 * count, out holds count*size), output elements for reduce-scatter (in holds
 * count*size), elements for all-reduce and broadcast. In place, as in NCCL:
 * all-gather's in is this rank's slice of out (out + rank*count elements),
 * reduce-scatter's out is this rank's chunk of in (in + rank*count), and
 * all-reduce passes the same buffer twice (in == out is in place for
 * all-gather and reduce-scatter only on rank 0; other ranks fail with
 * SYMMEM_ERR_INVALID). Broadcast is in place; root is a group rank.
 * algo: NULL or "auto", or "direct", "nccl", "nccl-window", "ce", "kernel",
 * "two-shot", "lc", "ll", "hier". */
int symmem_all_gather(symmem_group_t group, const void* in, void* out, size_t count, int dtype,
                      void* stream, const char* algo);
int symmem_reduce_scatter(symmem_group_t group, const void* in, void* out, size_t count, int dtype, int op,
                          void* stream, const char* algo);
int symmem_all_reduce(symmem_group_t group, const void* in, void* out, size_t count, int dtype, int op,
                      void* stream, const char* algo);
int symmem_broadcast(symmem_group_t group, void* buf, size_t count, int dtype, int root,
                     void* stream, const char* algo);

/* All-to-all, out of place (in and out must not overlap). (ABI version 4
 * added these calls.)
 * symmem_all_to_all: equal blocks, as ncclAlltoAll: in and out hold
 * count*size elements; block j of in (count elements) goes to group rank j,
 * block i of out comes from group rank i.
 * symmem_all_to_all_v: send_counts[j] elements go to group rank j and
 * recv_counts[i] come from group rank i (size counts each, >= 0), packed in
 * rank order from in and out, which hold in_count and out_count elements
 * (at least the sums; pass the buffers' whole sizes: a rank that sends or
 * receives nothing still passes its symmetric buffer). What a rank sends
 * must be what its peer expects: a difference fails the call on every rank
 * with SYMMEM_ERR_MISMATCH, naming both ranks and both counts.
 * symmem_all_to_all_vdev: the counts live in symmetric memory, as
 * torch.ops.symm_mem.all_to_all_vdev: splits holds size int64 (elements to
 * each group rank), written before the call (on its stream); the call
 * writes splits_out, 2*size int64: the elements received from each rank,
 * then each block's element offset in out. in_count and out_count bound
 * the counts: counts below zero, or that would
 * read past any rank's in or write past any rank's out, fail the call on
 * every rank with SYMMEM_ERR_INVALID before anything is written. in, out,
 * splits and splits_out must be symmetric buffers of the group. */
int symmem_all_to_all(symmem_group_t group, const void* in, void* out, size_t count, int dtype,
                      void* stream, const char* algo);
int symmem_all_to_all_v(symmem_group_t group, const void* in, void* out, size_t in_count, size_t out_count,
                        const int64_t* send_counts, const int64_t* recv_counts, int dtype, void* stream,
                        const char* algo);
int symmem_all_to_all_vdev(symmem_group_t group, const void* in, void* out, size_t in_count, size_t out_count,
                           const int64_t* splits, int64_t* splits_out, int dtype, void* stream, const char* algo);

/* The collectives with one count (all-to-all: equal blocks, ABI version 4)
 * through one entry point with six pointer-sized
 * arguments, for foreign-function callers that pay per argument (Python's
 * ctypes: ~55 ns a pointer, ~120 ns an int). call = SYMMEM_CALL(kind, dtype,
 * op, algo, root); in, out, count and stream as in the calls above; op is
 * read for reduce-scatter and all-reduce, root for broadcast, whose buffer
 * is out (in: NULL or out). Fields are 8 bits (root 32): pass the enum
 * values above. (ABI version 2 added this call.) */
#define SYMMEM_ALGO_AUTO 0
#define SYMMEM_ALGO_DIRECT 1
#define SYMMEM_ALGO_NCCL 2
#define SYMMEM_ALGO_NCCL_WINDOW 3
#define SYMMEM_ALGO_CE 4
#define SYMMEM_ALGO_KERNEL 5
#define SYMMEM_ALGO_TWO_SHOT 6
#define SYMMEM_ALGO_LC 7
#define SYMMEM_ALGO_LL 8
#define SYMMEM_ALGO_HIER 9
#define SYMMEM_CALL(kind, dtype, op, algo, root)                                                   \
  ((uint64_t)(uint8_t)(kind) | (uint64_t)(uint8_t)(dtype) << 8 | (uint64_t)(uint8_t)(op) << 16 | \
   (uint64_t)(uint8_t)(algo) << 24 | (uint64_t)(uint32_t)(root) << 32)
int symmem_collective(symmem_group_t group, uint64_t call, const void* in, void* out, size_t count, void* stream);
/* The Python package's binding of symmem_collective, not for C callers
 * (python/symmem/_lib.py): symmem_py_bind takes the addresses of seven
 * functions and objects of Python's stable C API (PyLong_AsUnsignedLongLong,
 * PyErr_Occurred, PyLong_FromLong, PyEval_SaveThread, PyEval_RestoreThread,
 * PyErr_SetString, PyExc_TypeError); symmem_py_collective is then a
 * METH_FASTCALL function (self, args, nargs) that the package makes a
 * builtin of: symmem_collective's six arguments as Python ints, the status
 * as a Python int, the GIL released during the call. (ABI version 3 added
 * these calls.) */
int symmem_py_bind(void* const* api, int n);
void* symmem_py_collective(void* self, void* const* args, ptrdiff_t nargs);

/* Reports as JSON into buf (always NUL-terminated when cap > 0); each returns
 * the full length, so a return >= cap means: call again with a larger buffer. */
int symmem_group_last_path(symmem_group_t group, char* buf, size_t cap);
int symmem_explain(symmem_group_t group, int kind, size_t bytes, int symmetric, char* buf, size_t cap);
int symmem_doctor(symmem_world_t world, char* buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* SYMMEM_H */
