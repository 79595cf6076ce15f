// Package libnccl is the only cgo boundary for NCCL. It loads libnccl.so.2 at
// run time with dlopen (no NCCL headers or link-time dependency), declares the
// few NCCL types it needs by hand (ncclUniqueId, ncclConfig_t of NCCL 2.28,
// the data-type and reduction enums) and wraps the calls symmem uses:
//
//   - library: Load / Open (search order: $SYMMEM_NCCL_LIB, the loader's
//     default "libnccl.so.2", then Python site-packages nvidia/nccl/lib),
//     Lib.Version, Lib.HasWindows;
//   - communicators: GetUniqueID, CommInitRank (ncclCommInitRankConfig),
//     Finalize, Destroy, Abort, AsyncError;
//   - collectives: AllGather, ReduceScatter, AllReduce, Broadcast — one cgo
//     call each, which also makes the caller's CUDA context current on the
//     OS thread that runs it (cuCtxSetCurrent), so goroutine migration
//     cannot leave NCCL on the wrong device;
//   - windows: WindowRegister / WindowDeregister (NCCL >= 2.27; absent
//     symbols give an error matching errs.NotSupported).
//
// Contexts, streams and device memory come from internal/native/cudadrv.
//
// Every failure is an *Error naming the NCCL (or CUDA) call with NCCL's
// ncclGetErrorString text. A missing library or symbol matches
// errs.NotSupported. Loading leaves the environment alone: the GPU backend
// decides NCCL_NVLS_ENABLE before it loads NCCL (internal/backend/cuda, Options.
// NCCLMulticast).
//
// Non-blocking communicators (Config.Blocking = 0) are supported: calls that
// NCCL accepts as in progress report it (IsInProgress) and Wait polls them
// under a deadline. Note that NCCL 2.28 completes every group on such a
// communicator on a new thread, and that ncclCommWindowRegister returns
// before it finished (WindowRegister always waits).
package libnccl
