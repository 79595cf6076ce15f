// Package nccl owns symmem's NCCL communicators: one Comm per group of
// ranks (one GPU per rank), created collectively — rank 0 makes the NCCL
// unique id and shares it through the rendezvous store under a key
// namespaced by group name and generation, every rank checks that the others
// agree (group size, NCCL version), then ncclCommInitRankConfig runs with the
// group's Config (CTA policy, CTA bounds, blocking) under a deadline.
//
// A Comm also owns the group's NCCL windows: Register / Deregister wrap
// ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) for pool segments. They
// are collective — every rank registers the same-sized segments in the same
// order; the pool drives and verifies that order before calling Register.
//
// Blocking vs non-blocking: communicators are blocking by default, because
// NCCL 2.28 runs every collective of a non-blocking communicator through a
// new thread: an order of magnitude more host time per call. A missing
// rank is caught before NCCL is entered — by the store exchange in New
// (libnccl.ErrTimeout) and by the pool's order verification before
// registration. A rank that dies
// inside NCCL's init or window registration
// makes them fail with libnccl.ErrTimeout after Options.Timeout on a blocking
// communicator too: the call runs on its own goroutine and is left blocked
// there (NCCL cannot safely abort a blocking communicator from another
// thread; the communicator is unusable, errs.Broken afterwards). Config.NonBlocking
// trades the per-call cost for bounded waits everywhere, finalize included,
// with the communicator aborted on a timeout.

// Collectives (AllGather, ReduceScatter, AllReduce, Broadcast, or Run for a
// backend.Request) are the same NCCL calls whether or not the buffers lie in
// a window: a window only lets NCCL pick its symmetric kernels. Run reports
// which it was (coll.AlgoNCCL or coll.AlgoNCCLWindow) in the Path.
//
// All cgo lives in internal/native/libnccl. Device memory, contexts and streams
// come from the caller (internal/backend/cuda) as raw handles.
package nccl
