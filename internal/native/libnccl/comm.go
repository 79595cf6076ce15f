package libnccl

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/symmem/symmem/internal/wait"
)

// GetUniqueID is ncclGetUniqueId (rank 0 calls it and shares the bytes).
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if rc := C.sm_unique_id(l.c, unsafe.Pointer(&id[0])); rc != 0 {
		return id, l.err("ncclGetUniqueId", rc, 0)
	}
	return id, nil
}

// CommHandle is a communicator plus the C strings its config points at
// (NCCL keeps commName and, during a non-blocking init, netName). Release
// them with Free after Destroy or Abort.
type CommHandle struct {
	Comm     Comm
	cstrings []*C.char
}

// Free releases the config strings. Call it only after the communicator
// is destroyed or aborted.
func (h *CommHandle) Free() {
	for _, s := range h.cstrings {
		C.free(unsafe.Pointer(s))
	}
	h.cstrings = nil
}

// CommInitRank is ncclCommInitRankConfig with cfg, run with CUDA context
// ctx current (0 = whatever is current on this thread). On a non-blocking
// config it returns as soon as NCCL accepted the call (the error is nil even
// if NCCL said ncclInProgress): call Wait before using the communicator.
// On failure after a communicator was created, the handle is returned too
// so the caller can Abort it.
func (l *Lib) CommInitRank(ctx uintptr, nranks, rank int, id UniqueID, cfg Config) (*CommHandle, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: ncclCommInitRankConfig: rank %d of %d is out of range", rank, nranks)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := l.needCtx(ctx); err != nil {
		return nil, err
	}
	h := &CommHandle{}
	var net, name *C.char
	if cfg.NetName != "" {
		net = C.CString(cfg.NetName)
		h.cstrings = append(h.cstrings, net)
	}
	if cfg.CommName != "" {
		name = C.CString(cfg.CommName)
		h.cstrings = append(h.cstrings, name)
	}
	ints := cfg.ints()
	var comm C.uintptr_t
	rc := C.sm_comm_init(l.c, C.uintptr_t(ctx), &comm, C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank),
		(*C.int32_t)(unsafe.Pointer(&ints[0])), C.uint(ConfigVersion), net, name)
	h.Comm = Comm(comm)
	if rc != 0 && rc != C.int(InProgress) {
		err := l.err("ncclCommInitRankConfig", rc, h.Comm)
		if h.Comm == 0 {
			h.Free()
			return nil, err
		}
		return h, err
	}
	return h, nil
}

// AsyncError is ncclCommGetAsyncError: the communicator's state (Success,
// InProgress, or the error an asynchronous operation ended with).
func (l *Lib) AsyncError(c Comm) (Result, error) {
	var st C.int
	if rc := C.sm_async_error(l.c, C.uintptr_t(c), &st); rc != 0 {
		return Result(st), l.err("ncclCommGetAsyncError", rc, c)
	}
	return Result(st), nil
}

// Wait polls the communicator until it leaves ncclInProgress. It returns
// nil once it is ready, the asynchronous error (naming call, the operation
// that was waited for) if one happened, or an error matching ErrTimeout when
// ctx ends first (abort the communicator then).
func (l *Lib) Wait(ctx context.Context, c Comm, call string) error {
	// A collective's group thread finishes in tens of microseconds: 256
	// polls that yield, then naps from 10 us doubling to 1 ms.
	return wait.Until(ctx, func() (bool, error) {
		st, err := l.AsyncError(c)
		switch {
		case err != nil:
			return false, err
		case st == Success:
			return true, nil
		case st == InProgress:
			return false, nil
		}
		return false, l.err(call, C.int(st), c)
	}, &wait.Options{Rounds: 256, YieldEvery: 1, Nap: 10 * time.Microsecond, MaxNap: time.Millisecond,
		Check: func(ctxErr error, _ bool) error {
			if ctxErr == nil {
				return nil
			}
			cause := context.Cause(ctx)
			if cause == nil {
				cause = ctxErr
			}
			return fmt.Errorf("nccl: %s still in progress: %w (%v)", call, ErrTimeout, cause)
		}})
}

// Finalize is ncclCommFinalize (flush outstanding work; may return
// in-progress on a non-blocking communicator: Wait then).
func (l *Lib) Finalize(ctx uintptr, c Comm) error {
	if err := l.needCtx(ctx); err != nil {
		return err
	}
	if rc := C.sm_finalize(l.c, C.uintptr_t(ctx), C.uintptr_t(c)); rc != 0 && rc != C.int(InProgress) {
		return l.err("ncclCommFinalize", rc, c)
	}
	return nil
}

// Destroy is ncclCommDestroy.
func (l *Lib) Destroy(ctx uintptr, c Comm) error {
	if err := l.needCtx(ctx); err != nil {
		return err
	}
	if rc := C.sm_destroy(l.c, C.uintptr_t(ctx), C.uintptr_t(c)); rc != 0 {
		return l.err("ncclCommDestroy", rc, 0)
	}
	return nil
}

// Revoke is ncclCommRevoke (flags 0): the communicator's in-flight work
// ends without waiting for peers; it stays allocated until Destroy. A
// non-blocking communicator may still be revoking: Wait for it. Only where
// HasRevoke.
func (l *Lib) Revoke(ctx uintptr, c Comm) error {
	if err := l.needCtx(ctx); err != nil {
		return err
	}
	if !l.HasRevoke {
		return notSupported("%s lacks ncclCommRevoke (NCCL 2.28+)", l.Path)
	}
	if rc := C.sm_revoke(l.c, C.uintptr_t(ctx), C.uintptr_t(c)); rc != 0 && rc != C.int(InProgress) {
		return l.err("ncclCommRevoke", rc, c)
	}
	return nil
}

// Abort is ncclCommAbort: frees the communicator without waiting for peers.
func (l *Lib) Abort(ctx uintptr, c Comm) error {
	if err := l.needCtx(ctx); err != nil {
		return err
	}
	if rc := C.sm_abort(l.c, C.uintptr_t(ctx), C.uintptr_t(c)); rc != 0 {
		return l.err("ncclCommAbort", rc, 0)
	}
	return nil
}
