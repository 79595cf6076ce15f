package main

// #include "abi.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
)

//export symmem_scope_open
func symmem_scope_open(gh C.uint64_t, out *C.uint64_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(fmt.Errorf("symmem_scope_open: scope is NULL: %w", symmem.ErrInvalid))
	}
	s, err := g.g.OpenScope()
	if err != nil {
		return fail(err)
	}
	h := handles.add(&scope{g: g, s: s})
	if err := g.w.own(h); err != nil {
		return fail(fmt.Errorf("symmem_scope_open: %w", err))
	}
	*out = C.uint64_t(h)
	return statusOK
}

//export symmem_scope_end
func symmem_scope_end(sh C.uint64_t) C.int {
	s, err := lookup[*scope](uint64(sh), "scope")
	if err != nil {
		return fail(err)
	}
	s.end.Lock()
	defer s.end.Unlock()
	if _, err := lookup[*scope](uint64(sh), "scope"); err != nil {
		return fail(err) // ended on another thread meanwhile: SYMMEM_ERR_BAD_HANDLE
	}
	err = s.s.End(context.Background())
	// The scope stays open only when inner scopes must end first.
	if err == nil || !isScopeOrder(err) {
		handles.remove(uint64(sh))
		s.g.w.disown(uint64(sh))
	}
	if err != nil {
		return fail(err)
	}
	return statusOK
}

//export symmem_alloc
func symmem_alloc(wh C.uint64_t, bytes C.size_t, out *unsafe.Pointer) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(fmt.Errorf("symmem_alloc: ptr is NULL (pass the address of a void*): %w", symmem.ErrInvalid))
	}
	b, err := w.w.Alloc(int64(bytes))
	if err != nil {
		return fail(err)
	}
	*out = C.symmemPtr(C.uintptr_t(b.Ptr))
	return statusOK
}

//export symmem_free
func symmem_free(wh C.uint64_t, ptr, stream unsafe.Pointer) C.int {
	w, err := lookup[*world](uint64(wh), "world")
	if err != nil {
		return fail(err)
	}
	if err := w.w.FreeOn(symmem.Buffer{Span: coll.Span{Ptr: addr(ptr)}}, addr(stream)); err != nil {
		return fail(err)
	}
	return statusOK
}

//export symmem_is_symmetric
func symmem_is_symmetric(gh C.uint64_t, ptr unsafe.Pointer, bytes C.size_t) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	if g.g.IsSymmetric(coll.Span{Ptr: addr(ptr), Len: int64(bytes)}) {
		return 1
	}
	return 0
}

// symmem_torch_alloc is PyTorch's CUDAPluggableAllocator alloc hook. It only
// takes a block from the pool (local, no collective: ranks reach it at
// different moments); the scope that is open around it registers new
// segments when it ends. NULL tells PyTorch the allocation failed.
//
// device is the device PyTorch allocates for: its index of the current CUDA
// device, a CUDA ordinal of this process, as the world's Device() is (both
// number the devices CUDA_VISIBLE_DEVICES leaves visible, in one order). The
// pool's memory is the world's GPU's, so an allocation for another device is
// refused: it would be a tensor labelled cuda:device whose memory is on
// another GPU.
//
//export symmem_torch_alloc
func symmem_torch_alloc(size C.size_t, device C.int, stream unsafe.Pointer) unsafe.Pointer {
	w := current.Load()
	if w == nil {
		setError("symmem_torch_alloc: no open symmem world: initialise one (symmem_init, or symmem.init() in Python) before allocating from symmem's MemPool")
		return nil
	}
	if b := w.w.Backend(); b != "cuda" {
		setError(fmt.Sprintf("symmem_torch_alloc: the world runs the %s backend, whose memory is not device memory: init with backend \"cuda\" for PyTorch CUDA tensors", b))
		return nil
	}
	if msg := torchDeviceError(uint64(size), int(device), w.w.Device()); msg != "" {
		setError(msg)
		return nil
	}
	b, err := w.w.Alloc(int64(size))
	if err != nil {
		setError(fmt.Sprintf("symmem_torch_alloc(%d bytes, device %d): %v", size, device, err))
		return nil
	}
	return C.symmemPtr(C.uintptr_t(b.Ptr))
}

// symmem_torch_free is the matching free hook: the block returns to the
// pool once the work on stream is done.
//
//export symmem_torch_free
func symmem_torch_free(ptr unsafe.Pointer, size C.size_t, device C.int, stream unsafe.Pointer) {
	w := current.Load()
	if w == nil {
		return // the world closed and released the pool with every block in it
	}
	s := addr(stream)
	if s == 0 {
		s = cuStreamLegacy // torch's default stream is CUDA's legacy one, not symmem's own
	}
	if err := w.w.FreeOn(symmem.Buffer{Span: coll.Span{Ptr: addr(ptr), Len: int64(size)}}, s); err != nil {
		setError(fmt.Sprintf("symmem_torch_free(%#x, %d bytes, device %d): %v", addr(ptr), size, device, err))
	}
}

// torchDeviceError is symmem_torch_alloc's refusal of an allocation for
// device when the pool's memory is on GPU world, or "" where they are one.
func torchDeviceError(size uint64, device, world int) string {
	if device == world {
		return ""
	}
	return fmt.Sprintf("symmem_torch_alloc(%d bytes, device %d): symmem's pool is memory of this rank's GPU %d, "+
		"not of device %d: make GPU %d torch's current device (torch.cuda.set_device(LOCAL_RANK) before symmem.init()) "+
		"before allocating from symmem's MemPool", size, device, world, device, world)
}

func isScopeOrder(err error) bool { return errors.Is(err, pool.ErrScopeOrder) }

func addr(p unsafe.Pointer) uint64 { return uint64(uintptr(p)) }

// cuStreamLegacy is CU_STREAM_LEGACY, the handle of CUDA's legacy default
// stream (what a NULL stream means to the CUDA runtime and to PyTorch).
const cuStreamLegacy = 0x1
