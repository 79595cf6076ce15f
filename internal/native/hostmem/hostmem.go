package hostmem

import (
	"fmt"
	"unsafe"
)

// ptr converts an address to an unsafe.Pointer without the uintptr round
// trip that go vet flags. The memory it names is either mmap'd (outside the
// Go heap) or kept alive by the caller (see the package doc).
func ptr(addr uint64) unsafe.Pointer {
	p := uintptr(addr)
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

// Addr returns the address of b's first element, or 0 when b has no backing
// array (nil, or zero capacity). The address is only meaningful while b's
// backing array is alive and, for Go memory, not moved (Go's heap does not
// move objects today; mmap'd memory never moves).
func Addr(b []byte) uint64 {
	if cap(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Bytes returns a slice of n bytes starting at addr. n == 0 returns nil.
// It panics if n is negative, if addr is 0 while n > 0, or if the range
// wraps around the address space: those are programming errors, not
// conditions a caller can handle.
func Bytes(addr uint64, n int) []byte {
	switch {
	case n < 0:
		panic(fmt.Sprintf("hostmem.Bytes: negative length %d", n))
	case n == 0:
		return nil
	case addr == 0:
		panic(fmt.Sprintf("hostmem.Bytes: nil address for %d bytes", n))
	case addr+uint64(n) < addr:
		panic(fmt.Sprintf("hostmem.Bytes: range %#x+%d wraps the address space", addr, n))
	}
	return unsafe.Slice((*byte)(ptr(addr)), n)
}

// Uint32At returns a pointer to the 32-bit word at addr, for use with
// sync/atomic (atomic.LoadUint32, atomic.AddUint32, ...) and the futex
// functions. addr must be non-zero and 4-byte aligned: otherwise Uint32At
// panics with a message naming the address, because a misaligned atomic is a
// layout bug in the caller (signal pads are laid out at aligned offsets) and
// would silently lose atomicity across cache lines. Use CheckAligned first if
// the address comes from untrusted input.
func Uint32At(addr uint64) *uint32 {
	if err := CheckAligned(addr, 4); err != nil {
		panic("hostmem.Uint32At: " + err.Error())
	}
	return (*uint32)(ptr(addr))
}

// CheckAligned returns an error unless addr is non-zero and a multiple of
// align (a power of two).
func CheckAligned(addr uint64, align uint64) error {
	if addr == 0 {
		return fmt.Errorf("nil address (want a %d-byte aligned word in mapped memory)", align)
	}
	if align == 0 || align&(align-1) != 0 {
		return fmt.Errorf("alignment %d is not a power of two", align)
	}
	if addr&(align-1) != 0 {
		return fmt.Errorf("address %#x is not %d-byte aligned (off by %d); lay words out at multiples of %d",
			addr, align, addr&(align-1), align)
	}
	return nil
}
