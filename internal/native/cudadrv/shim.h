// shim.h: hand-declared CUDA driver types and the small C layer of package
// cuda. No CUDA header is needed at build time: every type below mirrors the
// driver ABI (sizes are asserted in layout_test.go).
#ifndef SYMMEM_CUDA_SHIM_H
#define SYMMEM_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void* CUstream;
typedef void* CUevent;
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct { int type; int id; } symc_CUmemLocation;
typedef struct {
	int type;                  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
	int requestedHandleTypes;  // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
	symc_CUmemLocation location; // CU_MEM_LOCATION_TYPE_DEVICE = 1
	void* win32HandleMetaData;
	struct { unsigned char compressionType; unsigned char gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; } allocFlags;
} symc_CUmemAllocationProp;
typedef struct { symc_CUmemLocation location; int flags; } symc_CUmemAccessDesc;

typedef union {
	int operation;
	struct { int operation; CUdeviceptr address; union { uint32_t value; uint64_t value64; } v; unsigned int flags; CUdeviceptr alias; } waitValue;
	struct { int operation; CUdeviceptr address; union { uint32_t value; uint64_t value64; } v; unsigned int flags; CUdeviceptr alias; } writeValue;
	uint64_t pad[6];
} symc_CUstreamBatchMemOpParams;

// One step of a batched native call sequence (see exec.go).
typedef struct {
	int32_t kind;
	uint32_t flags;
	uint64_t stream;
	uint64_t a, b, c;
} symc_op;

enum {
	SYMC_OP_CTX = 1,        // a = context: make it current
	SYMC_OP_WRITE32 = 2,    // stream, a = address, b = value
	SYMC_OP_WAIT32 = 3,     // stream, a = address, b = value (flags: wait flags)
	SYMC_OP_COPY = 4,       // stream, a = dst, b = src, c = bytes
	SYMC_OP_RECORD = 5,     // stream, a = event
	SYMC_OP_WAITEVENT = 6,  // stream, a = event
	SYMC_OP_BATCH = 7,      // stream, a = n: the next n WRITE32/WAIT32 ops become one cuStreamBatchMemOp
	SYMC_OP_MEMSET32 = 8,   // stream, a = address, b = value, c = count of words
	SYMC_OP_GRAPH = 9,      // stream, a = CUgraphExec: launch it
	SYMC_OP_LAUNCH = 10,    // stream, a = CUfunction, b = its one parameter block, c = grid | block<<32
	SYMC_OP_FENCE = 11,     // stream, a = event: record it unless the stream is being captured
};

// symc_syms returns the table of driver entry points (*n entries): where
// each pointer goes, the names to try in order (versioned first), and
// whether the symbol is required.
typedef struct { void** slot; const char* names[3]; int required; } symc_sym;
symc_sym* symc_syms(int* n);
int symc_have_graphs(void);
CUresult symc_graph_destroy(CUcontext ctx, void* exec);
CUresult symc_begin_capture(CUcontext ctx, CUstream s);
CUresult symc_end_capture(CUcontext ctx, CUstream s, void** exec);
int symc_have_kernels(void);
CUresult symc_module_load(CUcontext ctx, const void* image, void** mod, char* log, unsigned loglen);
CUresult symc_module_function(CUcontext ctx, void* mod, const char* name, void** fn);
CUresult symc_module_unload(CUcontext ctx, void* mod);
CUresult symc_error_name(CUresult r, char* out, int outlen);

CUresult symc_init(int* driver, int* ndev);
CUresult symc_device_attr(int dev, int attr, int* v);
CUresult symc_device_name(int dev, char* out, int len);
CUresult symc_p2p(int a, int b, int* can, int* atomics, int* rank);
CUresult symc_primary_ctx(int dev, CUcontext* ctx);
CUresult symc_primary_ctx_release(int dev);
CUresult symc_mem_info(CUcontext ctx, size_t* free_, size_t* total);
CUresult symc_ptr_info(CUdeviceptr p, unsigned* type, int* ordinal);

CUresult symc_granularity(int dev, size_t* gran);
CUresult symc_vmm_create(CUcontext ctx, int dev, size_t size, CUmemGenericAllocationHandle* h);
CUresult symc_vmm_export(CUmemGenericAllocationHandle h, int* fd);
CUresult symc_vmm_import(int fd, CUmemGenericAllocationHandle* h);
CUresult symc_vmm_map(CUcontext ctx, CUmemGenericAllocationHandle h, size_t size, size_t align, const int* devs, int ndevs, CUdeviceptr* out);
CUresult symc_vmm_unmap(CUcontext ctx, CUdeviceptr p, size_t size);
CUresult symc_vmm_release(CUmemGenericAllocationHandle h);

CUresult symc_stream_create(CUcontext ctx, unsigned flags, int priority, CUstream* s);
CUresult symc_stream_destroy(CUcontext ctx, CUstream s);
CUresult symc_stream_sync(CUcontext ctx, CUstream s);
CUresult symc_stream_query(CUcontext ctx, CUstream s);
CUresult symc_stream_capturing(CUcontext ctx, CUstream s, int* status);
CUresult symc_event_create(CUcontext ctx, unsigned flags, CUevent* e);
CUresult symc_event_destroy(CUcontext ctx, CUevent e);
CUresult symc_event_record(CUcontext ctx, CUevent e, CUstream s);
CUresult symc_event_query(CUcontext ctx, CUevent e);
CUresult symc_event_sync(CUcontext ctx, CUevent e);
CUresult symc_event_elapsed(CUcontext ctx, CUevent a, CUevent b, float* ms);
CUresult symc_ctx_sync(CUcontext ctx);

CUresult symc_htod(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n);
CUresult symc_dtoh(CUcontext ctx, void* dst, CUdeviceptr src, size_t n);
CUresult symc_memset8(CUcontext ctx, CUdeviceptr dst, unsigned char v, size_t n);
CUresult symc_alloc_async(CUcontext ctx, size_t n, CUstream s, CUdeviceptr* p);
CUresult symc_free_async(CUcontext ctx, CUdeviceptr p, CUstream s);

// symc_exec runs ops[0..n) in order. On failure *failed is the index of the
// failing op and the CUresult is returned.
CUresult symc_exec(const symc_op* ops, int n, int* failed);
CUresult symc_host_mapped(CUcontext ctx, size_t n, void** host, CUdeviceptr* dev);
CUresult symc_host_free(CUcontext ctx, void* host);
CUresult symc_host_register(CUcontext ctx, void* host, size_t n, CUdeviceptr* dev);
CUresult symc_host_unregister(CUcontext ctx, void* host);

#endif
