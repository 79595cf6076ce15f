package pool

import (
	"context"
	"github.com/symmem/symmem/internal/errs"
)

// This file is the contract between the pool and the backends (CPU shared
// memory, CUDA). The pool owns all bookkeeping; backends own memory and
// registration mechanics but no pool state.

// SegmentID identifies a segment. IDs are assigned by the pool in creation
// order starting at 1 and are never reused within a pool, so the same
// sequence of calls yields the same IDs on every rank.
type SegmentID uint64

// Segment describes one segment as the pool tracks it.
type Segment struct {
	ID   SegmentID
	Base uint64 // this rank's address of the segment's first byte
	Size int64  // bytes, a multiple of the provider's granularity
}

// Provider creates and releases the memory behind segments. One provider
// serves one pool (one device or one process).
type Provider interface {
	// Granularity is the size every segment is rounded up to (a power of two).
	Granularity() int64
	// CreateSegment creates a segment of exactly size bytes (already rounded)
	// and returns this rank's base address of it.
	CreateSegment(id SegmentID, size int64) (base uint64, err error)
	// ReleaseSegment releases a segment created by CreateSegment. The pool
	// has deregistered it from every group before calling this.
	ReleaseSegment(id SegmentID) error
}

// Group is what a backend hands the pool for each group of ranks.
type Group interface {
	Rank() int // this rank's index in the group
	Size() int
	// AllGather is the small collective the pool uses to verify that all
	// ranks of a group agree before a collective registration or trim: it
	// returns every rank's bytes, indexed by group rank. It must honour
	// ctx's deadline and fail with an error naming missing ranks rather
	// than hang.
	AllGather(ctx context.Context, mine []byte) ([][]byte, error)
	// Register and Deregister register segments with the group. They are
	// collective over it: every rank calls them for the same segments in
	// the same order (the pool guarantees and verifies that).
	Register(ctx context.Context, seg Segment) error
	Deregister(ctx context.Context, seg Segment) error
	// Agreer is the group's in-band comparison of records, which every
	// Scope.End uses (no store round trip), or nil where the group has
	// none: the pool then compares through AllGather. The group declares
	// it here (the pool asserts no optional interface).
	Agreer() Agreer
	// Name identifies the group in errors and stats (e.g. "world", "tp0").
	Name() string
}

// Fence is a completion marker supplied by a backend (a GPU event). A block
// freed with a fence is not handed out again until Done reports true.
type Fence interface {
	Done() bool
}

// Sentinel errors. Wrapped errors carry the details; test with errors.Is.
// The pool's own kinds are also the user API's (a bad argument is
// errs.Invalid, the cap is ErrNoMemory), so errors.Is holds for both.
var (
	ErrInvalidSize      error = &kindError{"pool: invalid size", errs.Invalid}
	ErrInvalidAlignment error = &kindError{"pool: alignment must be a power of two", errs.Invalid}
	ErrNotAllocated     error = &kindError{"pool: address was not allocated by this pool", errs.Invalid}
	ErrDoubleFree       error = &kindError{"pool: block already freed", errs.Invalid}
	ErrCapExceeded      error = &kindError{"pool: allocation would exceed the pool's cap", ErrNoMemory}
	ErrScopeOrder       error = &kindError{"pool: scope ended twice or out of order", errs.Invalid}
	ErrGroupClosed            = errs.GroupClosed
	ErrMismatch               = errs.Mismatch
	ErrClosed                 = errs.Closed
)

// kindError is a sentinel of its own that is also of a broader kind.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
