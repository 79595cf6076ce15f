package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// CopyHtoD copies src into device memory at dst and returns once the bytes
// are in device memory (it synchronizes the context: a plain cuMemcpyHtoD
// from pageable memory may return before its DMA lands, and a peer told
// through the host would then read stale input). For setup and tests.
func CopyHtoD(ctx *Context, dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := check("cuMemcpyHtoD", C.symc_htod(ctx.h, C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))); err != nil {
		return fmt.Errorf("cuda: copying %d bytes to device %#x: %w", len(src), dst, err)
	}
	return nil
}

// CopyDtoH copies len(dst) bytes of device memory at src into dst (synchronous).
func CopyDtoH(ctx *Context, dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := check("cuMemcpyDtoH", C.symc_dtoh(ctx.h, unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst)))); err != nil {
		return fmt.Errorf("cuda: copying %d bytes from device %#x: %w", len(dst), src, err)
	}
	return nil
}

// Memset8 sets n bytes at dst to v and waits until it is done.
func Memset8(ctx *Context, dst uint64, v byte, n int64) error {
	return check("cuMemsetD8", C.symc_memset8(ctx.h, C.CUdeviceptr(dst), C.uchar(v), C.size_t(n)))
}

// AllocAsync allocates n bytes of device memory in stream order on stream
// (the device's default memory pool; captured into a graph as an
// allocation node): for scratch a call uses and frees on the same stream.
func AllocAsync(ctx *Context, stream uint64, n int64) (uint64, error) {
	var p C.CUdeviceptr
	if err := check("cuMemAllocAsync", C.symc_alloc_async(ctx.h, C.size_t(n), C.CUstream(ptrOf(stream)), &p)); err != nil {
		return 0, fmt.Errorf("cuda: allocating %d bytes in stream order: %w", n, err)
	}
	return uint64(p), nil
}

// FreeAsync frees an AllocAsync allocation once stream's earlier work is
// done.
func FreeAsync(ctx *Context, stream, ptr uint64) error {
	if err := check("cuMemFreeAsync", C.symc_free_async(ctx.h, C.CUdeviceptr(ptr), C.CUstream(ptrOf(stream)))); err != nil {
		return fmt.Errorf("cuda: freeing %#x in stream order: %w", ptr, err)
	}
	return nil
}

// HostMapped is pinned host memory that kernels read and write directly
// (a few words the host polls without a copy or a synchronisation).
type HostMapped struct {
	ctx   *Context
	host  unsafe.Pointer
	words []uint32
	dev   uint64
}

// NewHostMapped allocates n 32-bit words of mapped host memory, zeroed.
func NewHostMapped(ctx *Context, n int) (*HostMapped, error) {
	var host unsafe.Pointer
	var dev C.CUdeviceptr
	if err := check("cuMemHostAlloc", C.symc_host_mapped(ctx.h, C.size_t(4*n), &host, &dev)); err != nil {
		return nil, fmt.Errorf("cuda: %d bytes of mapped host memory: %w", 4*n, err)
	}
	return &HostMapped{ctx: ctx, host: host, words: unsafe.Slice((*uint32)(host), n), dev: uint64(dev)}, nil
}

// Device is the memory's address for kernels.
func (m *HostMapped) Device() uint64 { return m.dev }

// Load reads word i (atomically: a kernel may be writing it).
func (m *HostMapped) Load(i int) uint32 { return atomic.LoadUint32(&m.words[i]) }

// Store writes word i.
func (m *HostMapped) Store(i int, v uint32) { atomic.StoreUint32(&m.words[i], v) }

// CompareAndSwap sets word i to new if it holds old (host atomics: a kernel
// may write it at the same time, with plain stores).
func (m *HostMapped) CompareAndSwap(i int, old, new uint32) bool {
	return atomic.CompareAndSwapUint32(&m.words[i], old, new)
}

// Free releases the memory; no kernel may use it any more.
func (m *HostMapped) Free() error {
	if m.host == nil {
		return nil
	}
	err := check("cuMemFreeHost", C.symc_host_free(m.ctx.h, m.host))
	m.host, m.words = nil, nil
	return err
}

// HostRegistered is host memory that CUDA did not allocate (a mapping
// shared between processes) pinned and mapped for the device, so stream
// memory operations and kernels can read words other processes write.
type HostRegistered struct {
	ctx  *Context
	host unsafe.Pointer
	dev  uint64
}

// RegisterHost pins and maps b (page-aligned, alive until Unregister) for
// ctx's device.
func RegisterHost(ctx *Context, b []byte) (*HostRegistered, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("cuda: registering host memory: empty range")
	}
	host := unsafe.Pointer(&b[0])
	var dev C.CUdeviceptr
	if err := check("cuMemHostRegister", C.symc_host_register(ctx.h, host, C.size_t(len(b)), &dev)); err != nil {
		return nil, fmt.Errorf("cuda: registering %d bytes of host memory at %p: %w", len(b), host, err)
	}
	return &HostRegistered{ctx: ctx, host: host, dev: uint64(dev)}, nil
}

// Device is the memory's address on the device.
func (h *HostRegistered) Device() uint64 { return h.dev }

// Unregister unpins the memory; no stream may use it any more.
func (h *HostRegistered) Unregister() error {
	if h == nil || h.host == nil {
		return nil
	}
	err := check("cuMemHostUnregister", C.symc_host_unregister(h.ctx.h, h.host))
	h.host = nil
	return err
}
