// Package cudadrv is symmem's only cgo boundary to the CUDA driver. It loads
// libcuda.so.1 at run time through internal/native/dl (no CUDA headers or libraries at build time; the
// few driver types it needs are declared by hand in shim.h and their layouts
// are asserted in tests) and resolves the versioned entry points
// (cuMemcpyDtoDAsync_v2, cuStreamWriteValue32_v2, cuStreamWaitValue32_v2,
// cuEventElapsedTime_v2, cuStreamBatchMemOp_v2, ...).
//
// It owns:
//   - loading (Load): a missing library or symbol is an error matching
//     errs.NotSupported; every failing driver call is an *Error carrying the
//     call and the CUresult's name (cuGetErrorName);
//   - devices (Devices, DeviceInfo, P2P) and primary contexts (Retain);
//   - VMM memory: cuMemCreate with POSIX-fd handles, export/import of fds,
//     reserve+map+set-access and the reverse;
//   - streams, events, synchronous copies and memsets for setup and tests;
//   - stream-ordered scratch (AllocAsync, FreeAsync: cuMemAllocAsync);
//   - Exec: a whole sequence of stream operations (signal writes and waits,
//     copies, event records and waits, batched memory operations, kernel
//     launches, graph launches) issued in ONE cgo call, so a small collective
//     costs one crossing;
//   - modules (LoadModule: PTX JIT with the JIT log in errors), kernel
//     parameter blocks in C memory (Args), and stream capture into graphs.
//
// Contexts: the CUDA current context is per OS thread and goroutines move
// between threads, so every function here makes the right context current
// inside the same C call that uses it. Callers never call cuCtxSetCurrent.
package cudadrv
