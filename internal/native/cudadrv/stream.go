package cudadrv

/*
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

// Stream is a CUDA stream of one context.
type Stream struct {
	ctx *Context
	h   C.CUstream
}

// NewStream creates a non-blocking stream (it does not synchronise with the
// legacy default stream). priority 0 is normal; lower numbers are higher.
func NewStream(ctx *Context, priority int) (*Stream, error) {
	var s C.CUstream
	if err := check("cuStreamCreateWithPriority", C.symc_stream_create(ctx.h, 1, C.int(priority), &s)); err != nil {
		return nil, fmt.Errorf("cuda: creating a stream on device %d: %w", ctx.Dev, err)
	}
	return &Stream{ctx: ctx, h: s}, nil
}

// WrapStream adopts a stream created elsewhere (a framework's stream given
// as a raw handle). The stream must belong to ctx's device. 0 is the legacy
// default stream.
func WrapStream(ctx *Context, h uint64) *Stream {
	return &Stream{ctx: ctx, h: C.CUstream(ptrOf(h))}
}

// Handle is the raw CUstream.
func (s *Stream) Handle() uint64 { return uint64(uintptr(unsafe.Pointer(s.h))) }

// Destroy destroys a stream created by NewStream.
func (s *Stream) Destroy() error {
	return check("cuStreamDestroy", C.symc_stream_destroy(s.ctx.h, s.h))
}

// Synchronize blocks until the stream's work is done (no timeout: prefer Wait).
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", C.symc_stream_sync(s.ctx.h, s.h))
}

// Query reports nil when the stream is idle and ErrNotReady while it works.
func (s *Stream) Query() error { return check("cuStreamQuery", C.symc_stream_query(s.ctx.h, s.h)) }

// Wait polls the stream until it is idle, ctx ends or timeout passes.
func (s *Stream) Wait(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, "stream", s.Query, s.Synchronize)
}

// Event is a CUDA event of one context.
type Event struct {
	ctx *Context
	h   C.CUevent
}

// NewEvent creates an event; timing=false makes it cheaper (fences only).
func NewEvent(ctx *Context, timing bool) (*Event, error) {
	flags := C.uint(0)
	if !timing {
		flags = 2 // CU_EVENT_DISABLE_TIMING
	}
	var e C.CUevent
	if err := check("cuEventCreate", C.symc_event_create(ctx.h, flags, &e)); err != nil {
		return nil, fmt.Errorf("cuda: creating an event on device %d: %w", ctx.Dev, err)
	}
	return &Event{ctx: ctx, h: e}, nil
}

// WrapEvent wraps raw event handle h of ctx (not owned; tests give a fake
// group's events handles).
func WrapEvent(ctx *Context, h uint64) *Event { return &Event{ctx: ctx, h: C.CUevent(ptrOf(h))} }

// Handle is the raw CUevent.
func (e *Event) Handle() uint64 { return uint64(uintptr(unsafe.Pointer(e.h))) }

// Destroy destroys the event.
func (e *Event) Destroy() error { return check("cuEventDestroy", C.symc_event_destroy(e.ctx.h, e.h)) }

// Record records the event on s.
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", C.symc_event_record(e.ctx.h, e.h, s.h))
}

// Query is nil once the recorded work is done, ErrNotReady before.
func (e *Event) Query() error { return check("cuEventQuery", C.symc_event_query(e.ctx.h, e.h)) }

// Synchronize blocks until the event completed (no timeout: prefer Wait).
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", C.symc_event_sync(e.ctx.h, e.h))
}

// Done reports whether the recorded work completed (a pool.Fence).
func (e *Event) Done() bool { return e.Query() == nil }

// Wait polls the event until it completes, ctx ends or timeout passes. A
// stream stuck on a peer's signal shows up here as a timeout, not a hang.
func (e *Event) Wait(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, "event", e.Query, e.Synchronize)
}

// Elapsed is the time between two completed timing events, in milliseconds.
func Elapsed(start, end *Event) (float64, error) {
	var ms C.float
	if err := check("cuEventElapsedTime", C.symc_event_elapsed(end.ctx.h, start.h, end.h, &ms)); err != nil {
		return 0, err
	}
	return float64(ms), nil
}

// poll waits until q reports done. It first spins briefly (collectives of a
// few microseconds finish here), then blocks in sync (cuStreamSynchronize /
// cuEventSynchronize) on a helper goroutine, so completion is seen at once
// (a sleep-based poll adds up to its sleep to every measured time). ctx and
// timeout bound the wait; on timeout the helper stays blocked until the GPU
// work ends (one goroutine, only when a peer died or skipped a collective).
func poll(ctx context.Context, timeout time.Duration, what string, q func() error, sync func() error) error {
	if ok, err := wait.Poll(50*time.Microsecond, func() (bool, error) {
		err := q()
		if e, ok := err.(*Error); ok && e.Code == resNotReady {
			return false, nil
		}
		return err == nil, err
	}); ok || err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- sync() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("cuda: waiting for %s: %w", what, ctx.Err())
	case <-t.C:
		return fmt.Errorf("cuda: %s still busy after %v (a peer may have died or skipped a collective): %w", what, timeout, context.DeadlineExceeded)
	}
}

// ptrOf converts a raw handle into the void* the driver wants without a
// uintptr->unsafe.Pointer conversion that go vet flags.
func ptrOf(h uint64) unsafe.Pointer {
	p := uintptr(h)
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

// StreamCapturing reports whether the raw stream h is being captured into a
// CUDA graph.
func StreamCapturing(ctx *Context, h uint64) (bool, error) {
	var st C.int
	if err := check("cuStreamIsCapturing", C.symc_stream_capturing(ctx.h, C.CUstream(ptrOf(h)), &st)); err != nil {
		return false, err
	}
	return st != 0, nil
}
