#include <stddef.h>
#include <stdint.h>

// symmemSetError stores msg[0:n] as this thread's last error.
void symmemSetError(const char* msg, size_t n);

// symmemPtr turns an address into a pointer for C: Go code must not make an
// unsafe.Pointer from an integer.
void* symmemPtr(uintptr_t addr);
