// Command libsymmem is symmem's C ABI. Built as a shared library,
//
//	go build -buildmode=c-shared -o .build/libsymmem.so ./cmd/libsymmem
//
// it exports the functions declared in include/symmem.h, the stable
// hand-written header (the header go writes next to the library is cgo's own
// view; a test checks that the two and the library's symbols agree). The
// Python package in python/symmem binds it with ctypes.
//
// The ABI wraps the public user API of package symmem: worlds, groups and
// scopes are opaque integer handles into tables kept here (no Go pointer
// ever reaches C), buffers and streams are addresses, and failures return a
// negative status with the message in a per-thread last-error buffer.
package main

func main() {}
