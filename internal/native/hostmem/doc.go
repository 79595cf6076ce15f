// Package hostmem is the unsafe boundary for host memory. It is one of the
// few packages (with the rest of internal/native) allowed to import unsafe:
// every conversion between addresses and Go values that the CPU backend needs
// lives here, small and tested, so that the rest of symmem stays safe Go.
//
// It owns:
//   - Addr / Bytes: the address of a byte slice, and a byte slice over an
//     address (for memory mapped with mmap, e.g. memfd segments of the pool);
//   - Uint32At: typed pointers to aligned words in shared memory
//     for use with sync/atomic (signal pads, epochs);
//   - View / AsBytes: typed views of byte slices (and back) in host byte
//     order, so package reduce can run typed loops over mmap'd bytes; View
//     refuses misaligned or ragged slices (ok == false) instead of faulting;
//   - FutexWait / FutexWake: Linux futexes on such words. They are *shared*
//     futexes (no FUTEX_PRIVATE_FLAG), so a wake in one process reaches a
//     waiter in another process that maps the same memfd page.
//
// It does not create or map memory: internal/backend/shm does that with
// golang.org/x/sys/unix and hands the resulting addresses to this package.
//
// Memory rules: an address handed to Bytes or Uint32At must stay
// mapped (and, if it came from Go memory through Addr, the Go value must stay
// alive and referenced) for as long as the returned slice or pointer is used.
// The package cannot check this; misuse is a use-after-unmap fault.
package hostmem
