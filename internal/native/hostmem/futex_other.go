//go:build !linux

package hostmem

import (
	"errors"
	"fmt"
	"time"
)

// FutexWait is only implemented on Linux.
func FutexWait(addr uint64, val uint32, timeout time.Duration) error {
	return fmt.Errorf("hostmem.FutexWait: futexes need Linux: %w", errors.ErrUnsupported)
}

// FutexWake is only implemented on Linux.
func FutexWake(addr uint64, n int) error {
	return fmt.Errorf("hostmem.FutexWake: futexes need Linux: %w", errors.ErrUnsupported)
}
