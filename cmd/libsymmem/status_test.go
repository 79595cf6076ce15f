package main

import (
	"fmt"
	"testing"

	"github.com/symmem/symmem"
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
