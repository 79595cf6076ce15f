// shim.c: the driver's symbol table (filled by package dl) and C helpers
// that make a context current and issue one or many driver calls per cgo
// crossing.
#include <stdio.h>
#include <string.h>
#include "shim.h"

#define FN(ret, name, args) static ret(*p_##name) args;
FN(CUresult, cuInit, (unsigned))
FN(CUresult, cuDriverGetVersion, (int*))
FN(CUresult, cuDeviceGetCount, (int*))
FN(CUresult, cuDeviceGet, (CUdevice*, int))
FN(CUresult, cuDeviceGetAttribute, (int*, int, CUdevice))
FN(CUresult, cuDeviceGetName, (char*, int, CUdevice))
FN(CUresult, cuDeviceCanAccessPeer, (int*, CUdevice, CUdevice))
FN(CUresult, cuDeviceGetP2PAttribute, (int*, int, CUdevice, CUdevice))
FN(CUresult, cuDevicePrimaryCtxRetain, (CUcontext*, CUdevice))
FN(CUresult, cuDevicePrimaryCtxRelease, (CUdevice))
FN(CUresult, cuCtxSetCurrent, (CUcontext))
FN(CUresult, cuCtxSynchronize, (void))
FN(CUresult, cuGetErrorName, (CUresult, const char**))
FN(CUresult, cuMemGetInfo, (size_t*, size_t*))
FN(CUresult, cuPointerGetAttributes, (unsigned, int*, void**, CUdeviceptr))
FN(CUresult, cuMemHostAlloc, (void**, size_t, unsigned))
FN(CUresult, cuMemHostGetDevicePointer, (CUdeviceptr*, void*, unsigned))
FN(CUresult, cuMemFreeHost, (void*))
FN(CUresult, cuMemHostRegister, (void*, size_t, unsigned))
FN(CUresult, cuMemHostUnregister, (void*))
FN(CUresult, cuMemGetAllocationGranularity, (size_t*, const symc_CUmemAllocationProp*, int))
FN(CUresult, cuMemCreate, (CUmemGenericAllocationHandle*, size_t, const symc_CUmemAllocationProp*, unsigned long long))
FN(CUresult, cuMemExportToShareableHandle, (void*, CUmemGenericAllocationHandle, int, unsigned long long))
FN(CUresult, cuMemImportFromShareableHandle, (CUmemGenericAllocationHandle*, void*, int))
FN(CUresult, cuMemAddressReserve, (CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long))
FN(CUresult, cuMemAddressFree, (CUdeviceptr, size_t))
FN(CUresult, cuMemMap, (CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long))
FN(CUresult, cuMemUnmap, (CUdeviceptr, size_t))
FN(CUresult, cuMemSetAccess, (CUdeviceptr, size_t, const symc_CUmemAccessDesc*, size_t))
FN(CUresult, cuMemRelease, (CUmemGenericAllocationHandle))
FN(CUresult, cuStreamCreateWithPriority, (CUstream*, unsigned, int))
FN(CUresult, cuStreamDestroy, (CUstream))
FN(CUresult, cuStreamSynchronize, (CUstream))
FN(CUresult, cuStreamQuery, (CUstream))
FN(CUresult, cuStreamIsCapturing, (CUstream, int*))
FN(CUresult, cuStreamWaitEvent, (CUstream, CUevent, unsigned))
FN(CUresult, cuEventCreate, (CUevent*, unsigned))
FN(CUresult, cuEventDestroy, (CUevent))
FN(CUresult, cuEventRecord, (CUevent, CUstream))
FN(CUresult, cuEventQuery, (CUevent))
FN(CUresult, cuEventSynchronize, (CUevent))
FN(CUresult, cuEventElapsedTime, (float*, CUevent, CUevent))
FN(CUresult, cuMemcpyDtoDAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream))
FN(CUresult, cuMemcpyHtoD, (CUdeviceptr, const void*, size_t))
FN(CUresult, cuMemcpyDtoH, (void*, CUdeviceptr, size_t))
FN(CUresult, cuMemsetD8, (CUdeviceptr, unsigned char, size_t))
FN(CUresult, cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, CUstream))
FN(CUresult, cuMemAllocAsync, (CUdeviceptr*, size_t, CUstream))
FN(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream))
FN(CUresult, cuStreamWriteValue32, (CUstream, CUdeviceptr, uint32_t, unsigned))
FN(CUresult, cuStreamWaitValue32, (CUstream, CUdeviceptr, uint32_t, unsigned))
FN(CUresult, cuStreamBatchMemOp, (CUstream, unsigned, symc_CUstreamBatchMemOpParams*, unsigned))
FN(CUresult, cuStreamBeginCapture, (CUstream, int))
FN(CUresult, cuStreamEndCapture, (CUstream, void**))
FN(CUresult, cuGraphInstantiateWithFlags, (void**, void*, unsigned long long))
FN(CUresult, cuGraphLaunch, (void*, CUstream))
FN(CUresult, cuGraphExecDestroy, (void*))
FN(CUresult, cuGraphDestroy, (void*))
FN(CUresult, cuModuleLoadDataEx, (void**, const void*, unsigned, int*, void**))
FN(CUresult, cuModuleGetFunction, (void**, void*, const char*))
FN(CUresult, cuModuleUnload, (void*))
FN(CUresult, cuLaunchKernel, (void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**))

// syms: what package dl resolves into each pointer (load.go).
#define S(name, ...) { (void**)&p_##name, { __VA_ARGS__ }, 1 }
#define OPT(name, ...) { (void**)&p_##name, { __VA_ARGS__ }, 0 }
static symc_sym syms[] = {
	S(cuInit, "cuInit"),
	S(cuDriverGetVersion, "cuDriverGetVersion"),
	S(cuDeviceGetCount, "cuDeviceGetCount"),
	S(cuDeviceGet, "cuDeviceGet"),
	S(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
	S(cuDeviceGetName, "cuDeviceGetName"),
	S(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer"),
	S(cuDeviceGetP2PAttribute, "cuDeviceGetP2PAttribute"),
	S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
	S(cuCtxSetCurrent, "cuCtxSetCurrent"),
	S(cuCtxSynchronize, "cuCtxSynchronize"),
	S(cuGetErrorName, "cuGetErrorName"),
	S(cuMemGetInfo, "cuMemGetInfo_v2"),
	S(cuMemHostAlloc, "cuMemHostAlloc"),
	S(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer"),
	S(cuMemFreeHost, "cuMemFreeHost"),
	S(cuMemHostRegister, "cuMemHostRegister_v2", "cuMemHostRegister"),
	S(cuMemHostUnregister, "cuMemHostUnregister"),
	S(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
	S(cuMemCreate, "cuMemCreate"),
	S(cuMemExportToShareableHandle, "cuMemExportToShareableHandle"),
	S(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle"),
	S(cuMemAddressReserve, "cuMemAddressReserve"),
	S(cuMemAddressFree, "cuMemAddressFree"),
	S(cuMemMap, "cuMemMap"),
	S(cuMemUnmap, "cuMemUnmap"),
	S(cuMemSetAccess, "cuMemSetAccess"),
	S(cuMemRelease, "cuMemRelease"),
	S(cuStreamCreateWithPriority, "cuStreamCreateWithPriority"),
	S(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
	S(cuStreamSynchronize, "cuStreamSynchronize"),
	S(cuStreamQuery, "cuStreamQuery"),
	S(cuStreamIsCapturing, "cuStreamIsCapturing"),
	S(cuStreamWaitEvent, "cuStreamWaitEvent"),
	S(cuEventCreate, "cuEventCreate"),
	S(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
	S(cuEventRecord, "cuEventRecord"),
	S(cuEventQuery, "cuEventQuery"),
	S(cuEventSynchronize, "cuEventSynchronize"),
	S(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
	S(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
	S(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
	S(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
	S(cuPointerGetAttributes, "cuPointerGetAttributes"),
	S(cuMemsetD8, "cuMemsetD8_v2"),
	S(cuMemsetD32Async, "cuMemsetD32Async"),
	OPT(cuMemAllocAsync, "cuMemAllocAsync"),
	OPT(cuMemFreeAsync, "cuMemFreeAsync"),
	S(cuStreamWriteValue32, "cuStreamWriteValue32_v2", "cuStreamWriteValue32"),
	S(cuStreamWaitValue32, "cuStreamWaitValue32_v2", "cuStreamWaitValue32"),
	OPT(cuStreamBatchMemOp, "cuStreamBatchMemOp_v2", "cuStreamBatchMemOp"),
	OPT(cuStreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture"),
	OPT(cuStreamEndCapture, "cuStreamEndCapture"),
	OPT(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
	OPT(cuGraphLaunch, "cuGraphLaunch"),
	OPT(cuGraphExecDestroy, "cuGraphExecDestroy"),
	OPT(cuGraphDestroy, "cuGraphDestroy"),
	OPT(cuModuleLoadDataEx, "cuModuleLoadDataEx"),
	OPT(cuModuleGetFunction, "cuModuleGetFunction"),
	OPT(cuModuleUnload, "cuModuleUnload"),
	OPT(cuLaunchKernel, "cuLaunchKernel"),
};

symc_sym* symc_syms(int* n) {
	*n = sizeof syms / sizeof syms[0];
	return syms;
}

int symc_have_graphs(void) {
	return p_cuStreamBeginCapture && p_cuStreamEndCapture && p_cuGraphInstantiateWithFlags && p_cuGraphLaunch && p_cuGraphExecDestroy && p_cuGraphDestroy;
}

CUresult symc_error_name(CUresult r, char* out, int outlen) {
	const char* s = NULL;
	CUresult rc = p_cuGetErrorName(r, &s);
	if (rc == 0 && s) snprintf(out, outlen, "%s", s);
	return rc;
}

#define CK(x) do { CUresult r_ = (x); if (r_) return r_; } while (0)
#define CTX(c) CK(p_cuCtxSetCurrent(c))

CUresult symc_init(int* driver, int* ndev) {
	CK(p_cuInit(0));
	CK(p_cuDriverGetVersion(driver));
	return p_cuDeviceGetCount(ndev);
}

CUresult symc_device_attr(int dev, int attr, int* v) {
	CUdevice d; CK(p_cuDeviceGet(&d, dev));
	return p_cuDeviceGetAttribute(v, attr, d);
}

CUresult symc_device_name(int dev, char* out, int len) {
	CUdevice d; CK(p_cuDeviceGet(&d, dev));
	return p_cuDeviceGetName(out, len, d);
}

CUresult symc_p2p(int a, int b, int* can, int* atomics, int* rank) {
	CUdevice da, db; CK(p_cuDeviceGet(&da, a)); CK(p_cuDeviceGet(&db, b));
	CK(p_cuDeviceCanAccessPeer(can, da, db));
	*atomics = 0; *rank = 0;
	if (!*can) return 0;
	CK(p_cuDeviceGetP2PAttribute(rank, 1 /* PERFORMANCE_RANK */, da, db));
	return p_cuDeviceGetP2PAttribute(atomics, 3 /* NATIVE_ATOMIC_SUPPORTED */, da, db);
}

CUresult symc_primary_ctx(int dev, CUcontext* ctx) {
	CUdevice d; CK(p_cuDeviceGet(&d, dev));
	return p_cuDevicePrimaryCtxRetain(ctx, d);
}

CUresult symc_primary_ctx_release(int dev) {
	CUdevice d; CK(p_cuDeviceGet(&d, dev));
	return p_cuDevicePrimaryCtxRelease(d);
}

CUresult symc_mem_info(CUcontext ctx, size_t* free_, size_t* total) { CTX(ctx); return p_cuMemGetInfo(free_, total); }

// CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2) and _DEVICE_ORDINAL (9); an address
// CUDA does not know reads as type 0 (the call does not fail for it).
CUresult symc_ptr_info(CUdeviceptr p, unsigned* type, int* ordinal) {
	int attrs[2] = {2, 9};
	void* data[2] = {type, ordinal};
	*type = 0;
	*ordinal = -1;
	return p_cuPointerGetAttributes(2, attrs, data, p);
}

static void prop_for(int dev, symc_CUmemAllocationProp* p) {
	memset(p, 0, sizeof *p);
	p->type = 1;                 // CU_MEM_ALLOCATION_TYPE_PINNED
	p->requestedHandleTypes = 1; // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	p->location.type = 1;        // CU_MEM_LOCATION_TYPE_DEVICE
	p->location.id = dev;
}

CUresult symc_granularity(int dev, size_t* gran) {
	symc_CUmemAllocationProp p; prop_for(dev, &p);
	return p_cuMemGetAllocationGranularity(gran, &p, 0 /* MINIMUM */);
}

CUresult symc_vmm_create(CUcontext ctx, int dev, size_t size, CUmemGenericAllocationHandle* h) {
	CTX(ctx);
	symc_CUmemAllocationProp p; prop_for(dev, &p);
	return p_cuMemCreate(h, size, &p, 0);
}

CUresult symc_vmm_export(CUmemGenericAllocationHandle h, int* fd) {
	*fd = -1;
	return p_cuMemExportToShareableHandle(fd, h, 1, 0);
}

CUresult symc_vmm_import(int fd, CUmemGenericAllocationHandle* h) {
	return p_cuMemImportFromShareableHandle(h, (void*)(intptr_t)fd, 1);
}

// Reserve an address range, map h there and grant read/write access to devs.
// On failure everything done so far is undone.
CUresult symc_vmm_map(CUcontext ctx, CUmemGenericAllocationHandle h, size_t size, size_t align, const int* devs, int ndevs, CUdeviceptr* out) {
	CTX(ctx);
	CUdeviceptr p = 0;
	CK(p_cuMemAddressReserve(&p, size, align, 0, 0));
	CUresult r = p_cuMemMap(p, size, 0, h, 0);
	if (r) { p_cuMemAddressFree(p, size); return r; }
	symc_CUmemAccessDesc ad[64];
	if (ndevs > 64) ndevs = 64;
	for (int i = 0; i < ndevs; i++) { ad[i].location.type = 1; ad[i].location.id = devs[i]; ad[i].flags = 3; /* READWRITE */ }
	r = p_cuMemSetAccess(p, size, ad, (size_t)ndevs);
	if (r) { p_cuMemUnmap(p, size); p_cuMemAddressFree(p, size); return r; }
	*out = p;
	return 0;
}

CUresult symc_vmm_unmap(CUcontext ctx, CUdeviceptr p, size_t size) {
	CTX(ctx);
	CUresult r1 = p_cuMemUnmap(p, size);
	CUresult r2 = p_cuMemAddressFree(p, size);
	return r1 ? r1 : r2;
}

CUresult symc_vmm_release(CUmemGenericAllocationHandle h) { return p_cuMemRelease(h); }

CUresult symc_stream_create(CUcontext ctx, unsigned flags, int priority, CUstream* s) { CTX(ctx); return p_cuStreamCreateWithPriority(s, flags, priority); }
CUresult symc_stream_destroy(CUcontext ctx, CUstream s) { CTX(ctx); return p_cuStreamDestroy(s); }
CUresult symc_stream_sync(CUcontext ctx, CUstream s) { CTX(ctx); return p_cuStreamSynchronize(s); }
CUresult symc_stream_query(CUcontext ctx, CUstream s) { CTX(ctx); return p_cuStreamQuery(s); }
CUresult symc_stream_capturing(CUcontext ctx, CUstream s, int* status) { CTX(ctx); return p_cuStreamIsCapturing(s, status); }
CUresult symc_event_create(CUcontext ctx, unsigned flags, CUevent* e) { CTX(ctx); return p_cuEventCreate(e, flags); }
CUresult symc_event_destroy(CUcontext ctx, CUevent e) { CTX(ctx); return p_cuEventDestroy(e); }
CUresult symc_event_record(CUcontext ctx, CUevent e, CUstream s) { CTX(ctx); return p_cuEventRecord(e, s); }
CUresult symc_event_query(CUcontext ctx, CUevent e) { CTX(ctx); return p_cuEventQuery(e); }
CUresult symc_event_sync(CUcontext ctx, CUevent e) { CTX(ctx); return p_cuEventSynchronize(e); }
CUresult symc_event_elapsed(CUcontext ctx, CUevent a, CUevent b, float* ms) { CTX(ctx); return p_cuEventElapsedTime(ms, a, b); }
CUresult symc_ctx_sync(CUcontext ctx) { CTX(ctx); return p_cuCtxSynchronize(); }

/* cuMemcpyHtoD from pageable memory may return once the data is staged,
   before the DMA lands, and the cuMemset family is asynchronous: both are
   followed by a context synchronize so that the memory holds the new bytes
   when the call returns (a peer signalled through the host then reads
   them). */
CUresult symc_htod(CUcontext ctx, CUdeviceptr dst, const void* src, size_t n) {
	CTX(ctx);
	CUresult r = p_cuMemcpyHtoD(dst, src, n);
	return r != 0 ? r : p_cuCtxSynchronize();
}
CUresult symc_dtoh(CUcontext ctx, void* dst, CUdeviceptr src, size_t n) { CTX(ctx); return p_cuMemcpyDtoH(dst, src, n); }
CUresult symc_memset8(CUcontext ctx, CUdeviceptr dst, unsigned char v, size_t n) {
	CTX(ctx);
	CUresult r = p_cuMemsetD8(dst, v, n);
	return r != 0 ? r : p_cuCtxSynchronize();
}
// Stream-ordered allocation (CUDA 11.2): captured into a graph as
// allocation and free nodes. CUDA_ERROR_NOT_SUPPORTED (801) without it.
CUresult symc_alloc_async(CUcontext ctx, size_t n, CUstream s, CUdeviceptr* p) {
	if (!p_cuMemAllocAsync || !p_cuMemFreeAsync) return 801;
	CTX(ctx);
	return p_cuMemAllocAsync(p, n, s);
}
CUresult symc_free_async(CUcontext ctx, CUdeviceptr p, CUstream s) {
	if (!p_cuMemFreeAsync) return 801;
	CTX(ctx);
	return p_cuMemFreeAsync(p, s);
}
CUresult symc_exec(const symc_op* ops, int n, int* failed) {
	symc_CUstreamBatchMemOpParams batch[32];
	for (int i = 0; i < n; i++) {
		const symc_op* o = &ops[i];
		CUresult r = 0;
		*failed = i;
		switch (o->kind) {
		case SYMC_OP_CTX: r = p_cuCtxSetCurrent((CUcontext)(uintptr_t)o->a); break;
		case SYMC_OP_WRITE32: r = p_cuStreamWriteValue32((CUstream)(uintptr_t)o->stream, o->a, (uint32_t)o->b, o->flags); break;
		case SYMC_OP_WAIT32: r = p_cuStreamWaitValue32((CUstream)(uintptr_t)o->stream, o->a, (uint32_t)o->b, o->flags); break;
		case SYMC_OP_COPY: r = p_cuMemcpyDtoDAsync(o->a, o->b, (size_t)o->c, (CUstream)(uintptr_t)o->stream); break;
		case SYMC_OP_RECORD: r = p_cuEventRecord((CUevent)(uintptr_t)o->a, (CUstream)(uintptr_t)o->stream); break;
		case SYMC_OP_WAITEVENT: r = p_cuStreamWaitEvent((CUstream)(uintptr_t)o->stream, (CUevent)(uintptr_t)o->a, 0); break;
		case SYMC_OP_GRAPH: r = p_cuGraphLaunch((void*)(uintptr_t)o->a, (CUstream)(uintptr_t)o->stream); break;
		case SYMC_OP_LAUNCH: {
			void* params[1] = { (void*)(uintptr_t)o->b };
			r = p_cuLaunchKernel((void*)(uintptr_t)o->a, (unsigned)(o->c & 0xffffffffu), 1, 1, (unsigned)(o->c >> 32), 1, 1, 0,
				(CUstream)(uintptr_t)o->stream, params, NULL);
			break;
		}
		case SYMC_OP_MEMSET32: r = p_cuMemsetD32Async(o->a, (unsigned)o->b, (size_t)o->c, (CUstream)(uintptr_t)o->stream); break;
		case SYMC_OP_FENCE: {
			int st = 0; // CU_STREAM_CAPTURE_STATUS_NONE
			r = p_cuStreamIsCapturing((CUstream)(uintptr_t)o->stream, &st);
			if (r == 0 && st == 0) r = p_cuEventRecord((CUevent)(uintptr_t)o->a, (CUstream)(uintptr_t)o->stream);
			break;
		}
		case SYMC_OP_BATCH: {
			int m = (int)o->a;
			if (m < 1 || m > 32 || i + m >= n) return 1; // CUDA_ERROR_INVALID_VALUE
			if (!p_cuStreamBatchMemOp) {
				// No batch entry point: issue the ops one by one (same semantics).
				break;
			}
			memset(batch, 0, sizeof(batch[0]) * (size_t)m);
			for (int k = 0; k < m; k++) {
				const symc_op* q = &ops[i + 1 + k];
				if (q->kind == SYMC_OP_WRITE32) {
					batch[k].writeValue.operation = 2; // CU_STREAM_MEM_OP_WRITE_VALUE_32
					batch[k].writeValue.address = q->a;
					batch[k].writeValue.v.value = (uint32_t)q->b;
					batch[k].writeValue.flags = q->flags;
				} else if (q->kind == SYMC_OP_WAIT32) {
					batch[k].waitValue.operation = 1; // CU_STREAM_MEM_OP_WAIT_VALUE_32
					batch[k].waitValue.address = q->a;
					batch[k].waitValue.v.value = (uint32_t)q->b;
					batch[k].waitValue.flags = q->flags;
				} else {
					*failed = i + 1 + k;
					return 1;
				}
			}
			r = p_cuStreamBatchMemOp((CUstream)(uintptr_t)o->stream, (unsigned)m, batch, 0);
			if (r == 0) i += m;
			break;
		}
		default: return 1;
		}
		if (r) return r;
	}
	return 0;
}

CUresult symc_graph_destroy(CUcontext ctx, void* exec) { CTX(ctx); return p_cuGraphExecDestroy(exec); }

CUresult symc_begin_capture(CUcontext ctx, CUstream s) {
	if (!symc_have_graphs()) return 801;
	CTX(ctx);
	return p_cuStreamBeginCapture(s, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */);
}

CUresult symc_end_capture(CUcontext ctx, CUstream s, void** exec) {
	*exec = NULL;
	CTX(ctx);
	void* graph = NULL;
	CUresult r = p_cuStreamEndCapture(s, &graph);
	if (r == 0) r = p_cuGraphInstantiateWithFlags(exec, graph, 0);
	if (graph) p_cuGraphDestroy(graph);
	return r;
}

int symc_have_kernels(void) { return p_cuModuleLoadDataEx && p_cuModuleGetFunction && p_cuModuleUnload && p_cuLaunchKernel; }

// symc_module_load JIT-compiles or loads image (PTX text, NUL-terminated, or
// a cubin); the JIT error log goes to log (NUL-terminated).
CUresult symc_module_load(CUcontext ctx, const void* image, void** mod, char* log, unsigned loglen) {
	*mod = NULL;
	if (!symc_have_kernels()) return 801;
	CTX(ctx);
	int opts[2] = { 5 /* CU_JIT_ERROR_LOG_BUFFER */, 6 /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */ };
	void* vals[2] = { log, (void*)(uintptr_t)loglen };
	if (loglen) log[0] = 0;
	return p_cuModuleLoadDataEx(mod, image, 2, opts, vals);
}

CUresult symc_module_function(CUcontext ctx, void* mod, const char* name, void** fn) {
	CTX(ctx);
	return p_cuModuleGetFunction(fn, mod, name);
}

CUresult symc_module_unload(CUcontext ctx, void* mod) { CTX(ctx); return p_cuModuleUnload(mod); }

// Layout facts for the tests (layout_test.go compares them with Go's view).
size_t symc_sizeof_prop(void) { return sizeof(symc_CUmemAllocationProp); }
size_t symc_sizeof_access(void) { return sizeof(symc_CUmemAccessDesc); }
size_t symc_sizeof_batch(void) { return sizeof(symc_CUstreamBatchMemOpParams); }
size_t symc_offsetof_batch_value(void) { return offsetof(symc_CUstreamBatchMemOpParams, waitValue.v); }
size_t symc_offsetof_batch_flags(void) { return offsetof(symc_CUstreamBatchMemOpParams, waitValue.flags); }
size_t symc_offsetof_batch_alias(void) { return offsetof(symc_CUstreamBatchMemOpParams, waitValue.alias); }
size_t symc_offsetof_prop_win32(void) { return offsetof(symc_CUmemAllocationProp, win32HandleMetaData); }
size_t symc_sizeof_op(void) { return sizeof(symc_op); }

// Host memory the device reads and writes directly (pinned, mapped:
// CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), zeroed.
CUresult symc_host_mapped(CUcontext ctx, size_t n, void** host, CUdeviceptr* dev) {
	CTX(ctx);
	CUresult r = p_cuMemHostAlloc(host, n, 0x01 | 0x02);
	if (r != 0) return r;
	memset(*host, 0, n);
	r = p_cuMemHostGetDevicePointer(dev, *host, 0);
	if (r != 0) { p_cuMemFreeHost(*host); *host = NULL; }
	return r;
}
CUresult symc_host_free(CUcontext ctx, void* host) { CTX(ctx); return p_cuMemFreeHost(host); }
// Pins and maps n bytes at host (memory CUDA did not allocate, e.g. a shared
// mapping) for the device: PORTABLE | DEVICEMAP.
CUresult symc_host_register(CUcontext ctx, void* host, size_t n, CUdeviceptr* dev) {
	CTX(ctx);
	CUresult r = p_cuMemHostRegister(host, n, 0x01 | 0x02);
	if (r != 0) return r;
	r = p_cuMemHostGetDevicePointer(dev, host, 0);
	if (r != 0) p_cuMemHostUnregister(host);
	return r;
}
CUresult symc_host_unregister(CUcontext ctx, void* host) { CTX(ctx); return p_cuMemHostUnregister(host); }
