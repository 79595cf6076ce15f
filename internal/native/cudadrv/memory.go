package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
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

// Memset32 sets n 32-bit words at dst to v (dst 4-byte aligned) and waits
// until it is done.
func Memset32(ctx *Context, dst uint64, v uint32, n int64) error {
	return check("cuMemsetD32", C.symc_memset32(ctx.h, C.CUdeviceptr(dst), C.uint(v), C.size_t(n)))
}
