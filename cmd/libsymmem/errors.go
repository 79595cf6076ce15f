package main

// #include "abi.h"
import "C"

import (
	"context"
	"errors"
	"unsafe"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Status codes of include/symmem.h.
const (
	statusOK           = 0
	statusInvalid      = -1
	statusNotSupported = -2
	statusNotMember    = -3
	statusMismatch     = -4
	statusClosed       = -5
	statusTimeout      = -6
	statusPeer         = -7
	statusBadHandle    = -8
	statusInternal     = -9
	statusNoMemory     = -10
)

var errBadHandle = errors.New("symmem: bad handle")

// classes maps error kinds to status codes, first match wins: a dead peer
// is the root cause of whatever timed out or disagreed after it.
var classes = []struct {
	status int
	errs   []error
}{
	{statusBadHandle, []error{errBadHandle}},
	{statusPeer, []error{symmem.ErrPeerExited, symmem.ErrPeerClosed, symmem.ErrBroken, rendezvous.ErrUnreachable}},
	{statusMismatch, []error{symmem.ErrMismatch}}, // every layer's sentinels are these values (internal/errs)
	{statusNotMember, []error{symmem.ErrNotMember}},
	{statusClosed, []error{symmem.ErrClosed, symmem.ErrGroupClosed}},
	{statusNotSupported, []error{symmem.ErrNotSupported, symmem.ErrRefused}},
	{statusTimeout, []error{symmem.ErrTimeout, context.DeadlineExceeded, rendezvous.ErrTimeout}},
	// Memory that does not fit, apart from bad arguments: the caller can
	// free some or ask for less. The pool's cap is the same condition.
	{statusNoMemory, []error{symmem.ErrNoMemory, pool.ErrCapExceeded}},
	{statusInvalid, []error{symmem.ErrInvalid, symmem.ErrFreed, rendezvous.ErrBadEnv, rendezvous.ErrTokenRefused, pool.ErrInvalidSize, pool.ErrInvalidAlignment,
		pool.ErrNotAllocated, pool.ErrDoubleFree, pool.ErrScopeOrder}},
}

// code classifies err.
func code(err error) int {
	for _, c := range classes {
		for _, e := range c.errs {
			if errors.Is(err, e) {
				return c.status
			}
		}
	}
	return statusInternal
}

// fail records err as this thread's last error and returns its status.
func fail(err error) C.int {
	setError(err.Error())
	return C.int(code(err))
}

// setError stores msg in the calling thread's last-error buffer. An exported
// function runs on its C caller's thread, and so does this call.
func setError(msg string) {
	C.symmemSetError((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}
