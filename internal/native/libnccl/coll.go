package libnccl

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// Collectives. Each is one cgo call that makes CUDA context ctx current
// (when ctx != 0) and enqueues the NCCL collective on stream (0 = the legacy
// default stream). Counts are elements: for AllGather and ReduceScatter the
// per-rank count (NCCL's recvcount / sendcount), for AllReduce and Broadcast
// the whole buffer. On a non-blocking communicator a call may be accepted
// as in progress: the error then satisfies IsInProgress, and the caller
// must Wait before the next NCCL call on that communicator.

// AllGather is ncclAllGather: recv[rank*count:] = send of each rank.
func (l *Lib) AllGather(ctx uintptr, c Comm, send, recv uint64, count int64, dt DataType, stream uintptr) error {
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	if rc := C.sm_all_gather(l.c, C.uintptr_t(ctx), C.uint64_t(send), C.uint64_t(recv), C.size_t(count),
		C.int(dt), C.uintptr_t(c), C.uintptr_t(stream)); rc != 0 {
		return l.err("ncclAllGather", rc, c)
	}
	return nil
}

// ReduceScatter is ncclReduceScatter: recv (count elements) = op over ranks
// of send[rank*count:].
func (l *Lib) ReduceScatter(ctx uintptr, c Comm, send, recv uint64, count int64, dt DataType, op RedOp, stream uintptr) error {
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	if rc := C.sm_reduce_scatter(l.c, C.uintptr_t(ctx), C.uint64_t(send), C.uint64_t(recv), C.size_t(count),
		C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(stream)); rc != 0 {
		return l.err("ncclReduceScatter", rc, c)
	}
	return nil
}

// AllReduce is ncclAllReduce.
func (l *Lib) AllReduce(ctx uintptr, c Comm, send, recv uint64, count int64, dt DataType, op RedOp, stream uintptr) error {
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	if rc := C.sm_all_reduce(l.c, C.uintptr_t(ctx), C.uint64_t(send), C.uint64_t(recv), C.size_t(count),
		C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(stream)); rc != 0 {
		return l.err("ncclAllReduce", rc, c)
	}
	return nil
}

// Broadcast is ncclBroadcast from group rank root (send is read on root only).
func (l *Lib) Broadcast(ctx uintptr, c Comm, send, recv uint64, count int64, dt DataType, root int, stream uintptr) error {
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	if rc := C.sm_broadcast(l.c, C.uintptr_t(ctx), C.uint64_t(send), C.uint64_t(recv), C.size_t(count),
		C.int(dt), C.int(root), C.uintptr_t(c), C.uintptr_t(stream)); rc != 0 {
		return l.err("ncclBroadcast", rc, c)
	}
	return nil
}

// AllToAll is ncclAlltoAll (HasAllToAll): count elements from
// send[j*count:] go to rank j, and recv[i*count:] comes from rank i.
func (l *Lib) AllToAll(ctx uintptr, c Comm, send, recv uint64, count int64, dt DataType, stream uintptr) error {
	if !l.HasAllToAll {
		return notSupported("NCCL %s has no ncclAlltoAll", l.VersionString())
	}
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	if rc := C.sm_all_to_all(l.c, C.uintptr_t(ctx), C.uint64_t(send), C.uint64_t(recv), C.size_t(count),
		C.int(dt), C.uintptr_t(c), C.uintptr_t(stream)); rc != 0 {
		return l.err("ncclAlltoAll", rc, c)
	}
	return nil
}

// AllToAllV is one NCCL group (HasSendRecv) of ncclSend of sendCounts[j]
// elements at send[j] to rank j and ncclRecv of recvCounts[i] elements at
// recv[i] from rank i; zero counts are skipped, so the ranks' counts must
// match pairwise (what i sends j is what j receives from i).
func (l *Lib) AllToAllV(ctx uintptr, c Comm, send []uint64, sendCounts []int64, recv []uint64, recvCounts []int64, dt DataType, stream uintptr) error {
	if !l.HasSendRecv {
		return notSupported("NCCL %s lacks ncclSend, ncclRecv or the group calls", l.VersionString())
	}
	n := len(send)
	if len(sendCounts) != n || len(recv) != n || len(recvCounts) != n || n == 0 {
		return fmt.Errorf("nccl: all-to-all-v: %d send buffers, %d send counts, %d receive buffers, %d receive counts; want one of each per rank",
			n, len(sendCounts), len(recv), len(recvCounts))
	}
	if ctx != 0 && !l.HasCUDA {
		return l.needCtx(ctx)
	}
	sc, rc := make([]C.size_t, n), make([]C.size_t, n)
	for j := range n {
		if sendCounts[j] < 0 || recvCounts[j] < 0 {
			return fmt.Errorf("nccl: all-to-all-v: negative count for rank %d (send %d, receive %d)", j, sendCounts[j], recvCounts[j])
		}
		sc[j], rc[j] = C.size_t(sendCounts[j]), C.size_t(recvCounts[j])
	}
	if r := C.sm_all_to_all_v(l.c, C.uintptr_t(ctx), (*C.uint64_t)(unsafe.Pointer(&send[0])), &sc[0],
		(*C.uint64_t)(unsafe.Pointer(&recv[0])), &rc[0], C.int(n), C.int(dt), C.uintptr_t(c), C.uintptr_t(stream)); r != 0 {
		return l.err("ncclSend/ncclRecv group", r, c)
	}
	return nil
}

// WindowRegister is ncclCommWindowRegister: collective over the
// communicator (every rank registers the same-sized buffers in the same
// order); ptr must be VMM memory (cuMem* or ncclMemAlloc) aligned to
// WinAlignment. It always waits for the registration to complete (Wait with
// deadline wait): on a non-blocking communicator NCCL 2.28 returns before the
// registration finished, even with ncclSuccess. A zero Window with a
// nil error means NCCL accepted the call but made no window (this
// communicator has no symmetric support). On ErrTimeout the communicator
// must be aborted.
func (l *Lib) WindowRegister(wait context.Context, ctx uintptr, c Comm, ptr uint64, size int64, flags int) (Window, error) {
	if !l.HasWindows {
		return 0, notSupported("ncclCommWindowRegister missing in %s (NCCL %s; windows need NCCL >= %s)",
			l.Path, l.VersionString(), VersionString(MinWindowVersion))
	}
	if err := l.needCtx(ctx); err != nil {
		return 0, err
	}
	// NCCL writes the handle when the registration completes, which on a
	// non-blocking communicator is after the call returns (NCCL 2.28 even
	// returns ncclSuccess then): the slot is C memory, read only after Wait.
	slot := (*C.uintptr_t)(C.calloc(1, C.sizeof_uintptr_t))
	rc := C.sm_win_register(l.c, C.uintptr_t(ctx), C.uintptr_t(c), C.uint64_t(ptr), C.size_t(size), slot, C.int(flags))
	if rc != 0 && rc != C.int(InProgress) {
		C.free(unsafe.Pointer(slot))
		return 0, l.err("ncclCommWindowRegister", rc, c)
	}
	if err := l.Wait(wait, c, "ncclCommWindowRegister"); err != nil {
		if errors.Is(err, ErrTimeout) {
			return 0, err // slot deliberately leaked: NCCL may still write it
		}
		C.free(unsafe.Pointer(slot))
		return 0, err
	}
	w := Window(*slot)
	C.free(unsafe.Pointer(slot))
	return w, nil
}

// WindowDeregister is ncclCommWindowDeregister. A zero win is a no-op.
func (l *Lib) WindowDeregister(ctx uintptr, c Comm, win Window) error {
	if !l.HasWindows {
		return notSupported("ncclCommWindowDeregister missing in %s (NCCL %s)", l.Path, l.VersionString())
	}
	if win == 0 {
		return nil
	}
	if err := l.needCtx(ctx); err != nil {
		return err
	}
	if rc := C.sm_win_deregister(l.c, C.uintptr_t(ctx), C.uintptr_t(c), C.uintptr_t(win)); rc != 0 {
		return l.err("ncclCommWindowDeregister", rc, c)
	}
	return nil
}
