package nccl

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/internal/native/libnccl"
)

// bounded runs call — a blocking NCCL call that waits for every rank of the
// communicator (ncclCommInitRankConfig, ncclCommWindowRegister on a
// blocking communicator) — on its own goroutine and returns its result, or
// an error matching libnccl.ErrTimeout once ctx ends first, so a rank that died
// inside NCCL's init or registration cannot hang its peers beyond the group
// timeout.
//
// On timeout the call is left running: NCCL offers no safe way to interrupt
// a blocking communicator from another thread (ncclCommAbort while another
// thread is inside the same communicator's init is undefined; the
// non-blocking mode exists for that, at ten times the host time per
// collective, see the package doc). The communicator is never used again
// (the caller marks it broken without aborting it) and one OS thread stays
// blocked until the process exits, which the caller's error should lead to.
func bounded[T any](ctx context.Context, what string, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("nccl: %s did not complete: %w (%v; a peer rank died or stopped inside it; the call is left blocked on its thread and the communicator unusable)",
			what, libnccl.ErrTimeout, context.Cause(ctx))
	}
}
