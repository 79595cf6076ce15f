package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
)

// Granularity is the minimum VMM allocation granularity of dev for
// POSIX-fd-exportable device memory (2 MiB on H100/H200).
func Granularity(dev int) (int64, error) {
	if err := validDevice(dev); err != nil {
		return 0, err
	}
	var g C.size_t
	if err := check("cuMemGetAllocationGranularity", C.symc_granularity(C.int(dev), &g)); err != nil {
		return 0, fmt.Errorf("cuda: VMM granularity of device %d: %w", dev, err)
	}
	return int64(g), nil
}

// Allocation is a physical VMM allocation (a CUmemGenericAllocationHandle).
// It is freed when Release was called and every mapping of it is unmapped.
type Allocation struct {
	h    C.CUmemGenericAllocationHandle
	Size int64
}

// Create allocates size bytes (a multiple of Granularity) on ctx's device,
// exportable as a POSIX file descriptor.
func Create(ctx *Context, size int64) (*Allocation, error) {
	if size <= 0 {
		return nil, fmt.Errorf("cuda: VMM allocation of %d bytes: size must be positive", size)
	}
	var h C.CUmemGenericAllocationHandle
	if err := check("cuMemCreate", C.symc_vmm_create(ctx.h, C.int(ctx.Dev), C.size_t(size), &h)); err != nil {
		return nil, fmt.Errorf("cuda: allocating %d bytes on device %d: %w", size, ctx.Dev, err)
	}
	return &Allocation{h: h, Size: size}, nil
}

// ExportFD returns a new file descriptor for the allocation; the caller
// owns (closes) it.
func (a *Allocation) ExportFD() (int, error) {
	var fd C.int
	if err := check("cuMemExportToShareableHandle", C.symc_vmm_export(a.h, &fd)); err != nil {
		return -1, fmt.Errorf("cuda: exporting a %d-byte allocation as a file descriptor: %w", a.Size, err)
	}
	return int(fd), nil
}

// Import turns a file descriptor exported by another process into an
// allocation of this process. fd stays owned by the caller.
func Import(fd int, size int64) (*Allocation, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	if fd < 0 {
		return nil, fmt.Errorf("cuda: importing allocation: bad file descriptor %d", fd)
	}
	var h C.CUmemGenericAllocationHandle
	if err := check("cuMemImportFromShareableHandle", C.symc_vmm_import(C.int(fd), &h)); err != nil {
		return nil, fmt.Errorf("cuda: importing allocation from fd %d: %w", fd, err)
	}
	return &Allocation{h: h, Size: size}, nil
}

// Map reserves address space, maps the whole allocation there and grants
// read/write access to every device in access. It returns the address.
func (a *Allocation) Map(ctx *Context, align int64, access []int) (uint64, error) {
	if len(access) == 0 || len(access) > 64 {
		return 0, fmt.Errorf("cuda: mapping needs 1..64 devices to grant access to, got %d", len(access))
	}
	devs := make([]C.int, len(access))
	for i, d := range access {
		devs[i] = C.int(d)
	}
	var p C.CUdeviceptr
	if err := check("cuMemMap", C.symc_vmm_map(ctx.h, a.h, C.size_t(a.Size), C.size_t(align), &devs[0], C.int(len(devs)), &p)); err != nil {
		return 0, fmt.Errorf("cuda: mapping %d bytes for devices %v: %w", a.Size, access, err)
	}
	return uint64(p), nil
}

// Unmap undoes Map for the range [ptr, ptr+size).
func Unmap(ctx *Context, ptr uint64, size int64) error {
	if err := check("cuMemUnmap", C.symc_vmm_unmap(ctx.h, C.CUdeviceptr(ptr), C.size_t(size))); err != nil {
		return fmt.Errorf("cuda: unmapping %#x (+%d): %w", ptr, size, err)
	}
	return nil
}

// Release drops this process's handle; the memory goes when no mapping
// remains.
func (a *Allocation) Release() error {
	return check("cuMemRelease", C.symc_vmm_release(a.h))
}
