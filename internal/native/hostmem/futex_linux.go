package hostmem

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations without FUTEX_PRIVATE_FLAG: the words live in memfd
// memory mapped by several processes, and a private futex would key the
// wait on this process's mm only, so a wake from a peer would never arrive.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// FutexWait sleeps while the 32-bit word at addr holds val, for at most
// timeout. It returns nil when woken by FutexWake, when the word did not hold
// val on entry (the kernel checks atomically, so a wake between the caller's
// load and the sleep is never lost), or on a spurious wake: callers re-check
// their condition in a loop. It returns an error wrapping ErrTimeout (and
// os.ErrDeadlineExceeded) when timeout passes. EINTR is retried with the
// remaining time. A timeout <= 0 does not sleep: it returns nil if the word
// differs from val and the timeout error otherwise. addr must be non-zero and
// 4-byte aligned (an error says so).
func FutexWait(addr uint64, val uint32, timeout time.Duration) error {
	if err := CheckAligned(addr, 4); err != nil {
		return fmt.Errorf("hostmem.FutexWait: %w", err)
	}
	if timeout <= 0 {
		if atomic.LoadUint32(Uint32At(addr)) != val { // shared with other processes: an atomic read
			return nil
		}
		return fmt.Errorf("hostmem.FutexWait at %#x (value %d, timeout %v): %w", addr, val, timeout, ErrTimeout)
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("hostmem.FutexWait at %#x (value %d, timeout %v): %w", addr, val, timeout, ErrTimeout)
		}
		ts := unix.NsecToTimespec(int64(left))
		_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), futexWait, uintptr(val),
			uintptr(unsafe.Pointer(&ts)), 0, 0)
		switch e {
		case 0, unix.EAGAIN: // woken (or spurious), or value already changed
			return nil
		case unix.EINTR:
			continue
		case unix.ETIMEDOUT:
			return fmt.Errorf("hostmem.FutexWait at %#x (value %d, timeout %v): %w", addr, val, timeout, ErrTimeout)
		default:
			return fmt.Errorf("hostmem.FutexWait at %#x: %w", addr, error(e))
		}
	}
}

// FutexWake wakes up to n waiters (n <= 0 means all) sleeping on the word at
// addr, in this or any other process that maps the same memory.
func FutexWake(addr uint64, n int) error {
	if err := CheckAligned(addr, 4); err != nil {
		return fmt.Errorf("hostmem.FutexWake: %w", err)
	}
	if n <= 0 || n > 1<<30 {
		n = 1 << 30 // INT_MAX-ish: everyone
	}
	for {
		_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(addr), futexWake, uintptr(n), 0, 0, 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return fmt.Errorf("hostmem.FutexWake at %#x: %w", addr, error(e))
		}
	}
}
