package cudadrv

/*
#include "shim.h"
*/
import "C"

// Memory types of PointerInfo (CUmemorytype; 0: an address CUDA does not
// know, such as ordinary host memory).
const (
	MemoryUnknown = 0
	MemoryHost    = 1 // page-locked host memory registered with CUDA
	MemoryDevice  = 2
	MemoryArray   = 3
	MemoryUnified = 4
)

// PointerInfo returns the memory type of addr and the device it belongs to
// (-1 when none), with cuPointerGetAttributes: no context needed, and an
// address CUDA does not know is MemoryUnknown, not an error.
func PointerInfo(addr uint64) (memType, ordinal int, err error) {
	var t C.unsigned
	var o C.int
	if err := check("cuPointerGetAttributes", C.symc_ptr_info(C.CUdeviceptr(addr), &t, &o)); err != nil {
		return 0, -1, err
	}
	return int(t), int(o), nil
}
