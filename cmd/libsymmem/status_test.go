package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// TestFreedStatus: a collective on freed pool memory (symmem.ErrFreed) is
// a bad argument, SYMMEM_ERR_INVALID (it was SYMMEM_ERR_INTERNAL, -9;
// found by review).
func TestFreedStatus(t *testing.T) {
	err := fmt.Errorf("symmem: all_reduce on group %q (rank 0): span [0x1000, +64) lies in pool memory that is not allocated (used after World.Free?): %w", "world", symmem.ErrFreed)
	if got := code(err); got != statusInvalid {
		t.Errorf("code(ErrFreed) = %d, want SYMMEM_ERR_INVALID (%d)", got, statusInvalid)
	}
}

// TestNoMemoryStatus: memory that does not fit, on this rank or (through
// allMade's sentinel) a peer, and the pool's cap are SYMMEM_ERR_NO_MEMORY,
// not SYMMEM_ERR_INTERNAL or SYMMEM_ERR_INVALID.
func TestNoMemoryStatus(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("symmem: Alloc(1024): pool: Alloc(1024) needs a new 2MiB segment: %w", symmem.ErrNoMemory),
		fmt.Errorf("symmem: NewGroup %q: rank 1 failed: ...: %w", "tp", symmem.ErrNoMemory),
		fmt.Errorf("%w: Alloc(1024) needs a new 2097152-byte segment", pool.ErrCapExceeded),
	} {
		if got := code(err); got != statusNoMemory {
			t.Errorf("code(%v) = %d, want SYMMEM_ERR_NO_MEMORY (%d)", err, got, statusNoMemory)
		}
	}
}

// TestStartupStatus: a store of another job (ErrTokenRefused) is a wrong
// environment, as a bad one is: SYMMEM_ERR_INVALID (it was INTERNAL).
func TestStartupStatus(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("symmem: Init: rendezvous: the store at 127.0.0.1:29501 is not this job's: %w", rendezvous.ErrTokenRefused),
		fmt.Errorf("symmem: Init: %w: MASTER_ADDR %q", rendezvous.ErrBadEnv, "a b"),
	} {
		if got := code(err); got != statusInvalid {
			t.Errorf("code(%v) = %d, want SYMMEM_ERR_INVALID (%d)", err, got, statusInvalid)
		}
	}
}

// TestTimeoutStatus: a timeout is SYMMEM_ERR_TIMEOUT, also when it wraps
// only symmem.ErrTimeout (a peer's timeout passed on as the sentinel).
func TestTimeoutStatus(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("symmem: NewGroup %q: rank 1 failed: ...: %w", "tp", symmem.ErrTimeout),
		fmt.Errorf("symmem: all_gather: waiting for rank 1: %w", context.DeadlineExceeded),
	} {
		if got := code(err); got != statusTimeout {
			t.Errorf("code(%v) = %d, want SYMMEM_ERR_TIMEOUT (%d)", err, got, statusTimeout)
		}
	}
}
