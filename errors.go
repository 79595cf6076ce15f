package symmem

import (
	"context"
	"errors"
	"os"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Sentinel errors; the wrapped error says what was wrong and what to do.
// They are the values every layer below wraps (package internal/errs
// defines each once), so errors.Is holds whichever layer failed: a
// registration mismatch found by the pool at Scope.End is ErrMismatch, a
// group broken in the CPU or GPU backend or in NCCL is ErrBroken.
var (
	// ErrNotSupported: the requested backend, algorithm or option is not
	// available in this build or on this machine (WithAlgo naming an
	// algorithm the backend does not have, Backend "cuda" without a usable
	// GPU, a missing NCCL).
	ErrNotSupported = errs.NotSupported
	// ErrRefused: a forced algorithm (WithAlgo) exists on this backend but
	// cannot run this call (its size, alignment, dtype or buffers); nothing
	// was enqueued and every rank refuses alike. auto never refuses.
	ErrRefused = errs.Refused
	// ErrInvalid: a bad argument (length, dtype, op, root, ranks, overlap);
	// nothing was changed.
	ErrInvalid = errs.Invalid
	// ErrNotMember: a collective or scope was used on a group this rank is
	// not a member of.
	ErrNotMember = errors.New("symmem: rank is not a member of the group")
	// ErrMismatch: ranks called a collective (or NewGroup, Group.Close,
	// Scope.End) with different arguments; the error names the first
	// differing rank.
	ErrMismatch = errs.Mismatch
	// ErrClosed: the world (or the pool or store under it) was closed.
	ErrClosed = errs.Closed
	// ErrGroupClosed: the group was closed (Group.Close).
	ErrGroupClosed = errs.GroupClosed
	// ErrBroken: an earlier collective on the group failed midway (a peer
	// died or timed out); the group cannot be used again.
	ErrBroken = errs.Broken
	// ErrPeerExited: a peer rank's process exited (also without Close, or
	// killed) while this rank waited for it (in a collective, a scope end,
	// NewGroup, Close, or a copy-engine or NCCL call at the GPU backend's
	// call gate); the error names the rank.
	ErrPeerExited = errs.PeerExited
	// ErrPeerClosed: a peer rank called World.Close (or Group.Close of the
	// group) while this rank waited for it in a collective, a scope end or
	// NewGroup (it made fewer calls than this rank). The error names the
	// rank; the group cannot be used again.
	ErrPeerClosed = errs.PeerClosed
	// ErrFreed: a buffer (or a span in pool memory) was used after
	// World.Free returned it to the pool.
	ErrFreed = errors.New("symmem: buffer was freed")
	// ErrNoMemory: the memory asked for does not fit in what is left
	// (host memory on the CPU backend, free device memory on the GPU, or the
	// pool's cap, Options.Pool.Cap); the error names the size and the limit.
	ErrNoMemory = pool.ErrNoMemory
	// ErrTimeout: a wait ran past Options.Timeout or the caller's context
	// deadline (a peer that never came, a stuck device); the error names
	// what was waited for and also wraps the deadline error itself, so
	// errors.Is(err, context.DeadlineExceeded) holds too. A collective
	// that timed out leaves its group broken (ErrBroken after).
	ErrTimeout = errs.Timeout
)

// sentinels are the errors a rank's failure is sent to its peers as
// (allMade), by position: change only by appending.
var sentinels = []error{ErrInvalid, ErrNotSupported, ErrNoMemory, ErrMismatch, ErrPeerExited, ErrPeerClosed, ErrBroken, ErrClosed, ErrGroupClosed, ErrTimeout}

// sentinelIndex is 1 + the position of the first sentinel err wraps, 0 if
// none.
func sentinelIndex(err error) int {
	for i, s := range sentinels {
		if errors.Is(err, s) {
			return i + 1
		}
	}
	return 0
}

// markTimeout makes *err wrap ErrTimeout as well where it is a wait past
// a deadline (the layers below wrap only the deadline error they met),
// keeping its message and what it wraps. Deferred by the calls that wait.
func markTimeout(err *error) {
	e := *err
	if e == nil || errors.Is(e, ErrTimeout) {
		return
	}
	if errors.Is(e, context.DeadlineExceeded) || errors.Is(e, os.ErrDeadlineExceeded) || errors.Is(e, rendezvous.ErrTimeout) {
		*err = timeoutError{e}
	}
}

// timeoutError is a timeout from a layer below, as ErrTimeout too.
type timeoutError struct{ err error }

func (e timeoutError) Error() string   { return e.err.Error() }
func (e timeoutError) Unwrap() []error { return []error{e.err, ErrTimeout} }
