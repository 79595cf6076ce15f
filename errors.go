package symmem

import (
	"errors"

	"github.com/symmem/symmem/pool"
)

// Sentinel errors; the wrapped error says what was wrong and what to do.
var (
	// ErrNotSupported: the requested backend, algorithm or option is not
	// available in this build or on this machine.
	ErrNotSupported = errors.New("symmem: not supported")
	// ErrInvalid: a bad argument (length, dtype, op, root, ranks, overlap);
	// nothing was changed.
	ErrInvalid = errors.New("symmem: invalid argument")
	// ErrNotMember: a collective or scope was used on a group this rank is
	// not a member of.
	ErrNotMember = errors.New("symmem: rank is not a member of the group")
	// ErrMismatch: ranks called a collective (or NewGroup) with different
	// arguments; the error names the first differing rank.
	ErrMismatch = errors.New("symmem: ranks disagree")
	// ErrClosed: the world was closed.
	ErrClosed = errors.New("symmem: world is closed")
	// ErrGroupClosed: the group was closed (Group.Close).
	ErrGroupClosed = errors.New("symmem: group is closed")
	// ErrFreed: a buffer (or a span in pool memory) was used after
	// World.Free returned it to the pool.
	ErrFreed = errors.New("symmem: buffer was freed")
	// ErrNoMemory: the memory asked for does not fit in what is left
	// (host memory on the CPU backend, free device memory on the GPU); the
	// error names the size and the limit.
	ErrNoMemory = pool.ErrNoMemory
)
