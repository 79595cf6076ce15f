// Package backend is the contract between the user API (package symmem) and
// the backends that move data: backend/shm (CPU shared memory) and
// backend/cuda (GPUs, with backend/nccl). A backend supplies segments to the
// shared pool, groups that register segments and verify agreement, and the
// execution of collective requests.
package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// ErrRefused is wrapped when a call forces an algorithm (Request.Algo) that
// cannot run this particular call — a size, alignment, type or buffer it
// does not serve. Nothing was enqueued, and every rank refuses alike (the
// choice depends only on what all ranks share); `auto` never refuses this
// way.
var ErrRefused = errors.New("backend: the requested algorithm cannot run this call")

// Backend is one kind of memory and transport.
type Backend interface {
	Name() string
	// Provider supplies the segments of this process's one pool.
	Provider() pool.Provider
	// NewGroup creates the backend side of a group. It is collective over
	// cfg.Ranks.
	NewGroup(ctx context.Context, cfg GroupConfig) (Group, error)
	Close() error
}

// GroupConfig describes a group of ranks to a backend.
type GroupConfig struct {
	Name    string
	Ranks   []int // global ranks of the members, ascending
	Rank    int   // this process's global rank (a member of Ranks)
	Store   *rendezvous.Client
	FDs     *rendezvous.FDExchange // local fd passing; nil when unused
	Timeout time.Duration          // bound on every wait
}

// Sym locates a span inside a symmetric block that is registered with the
// group executing the request. OK is false for ordinary memory.
type Sym struct {
	OK  bool
	Seg pool.SegmentID
	Off int64 // byte offset of the span's first byte within the segment
}

// Request is one collective call, already validated by the user API.
//
// Counts are elements. For AllGather, In holds Count elements and Out holds
// Count*Size; in-place is In == Out[rank*Count:]. For ReduceScatter, In holds
// Count*Size and Out holds Count. AllReduce and Broadcast use Count for both
// (Broadcast works in Out only, In is ignored).
type Request struct {
	Kind    coll.Kind
	DType   coll.DType
	Op      coll.ReduceOp
	Root    int // group rank, Broadcast only
	Count   int64
	In, Out coll.Span
	InSym   Sym
	OutSym  Sym
	Algo    coll.Algo
	Stream  uint64 // CUDA stream (0 = the backend's own); unused on CPU
	// Check describes the call as every rank must make it (the user API's
	// argument record). Backends that implement pool.Agreer compare it
	// across the ranks in-band before any data moves and fail with a
	// *pool.Disagreement otherwise. The zero value checks nothing.
	Check pool.Record
}

// Group is the backend side of one group.
type Group interface {
	pool.Group
	// Run executes req. Backends that need symmetric buffers for a path say
	// so in the returned error; the user API stages ordinary memory first.
	Run(ctx context.Context, req Request) (coll.Path, error)
	Close() error
}

// Index validates cfg (ranks ascending without repeats, this rank a member,
// a store present) and returns this rank's index in Ranks, its group rank.
func (cfg GroupConfig) Index() (int, error) {
	me := -1
	for i, r := range cfg.Ranks {
		if i > 0 && r <= cfg.Ranks[i-1] {
			return -1, fmt.Errorf("group %q: ranks %v must be ascending without repeats", cfg.Name, cfg.Ranks)
		}
		if r == cfg.Rank {
			me = i
		}
	}
	switch {
	case me < 0:
		return -1, fmt.Errorf("group %q: rank %d is not a member of ranks %v", cfg.Name, cfg.Rank, cfg.Ranks)
	case cfg.Store == nil:
		return -1, fmt.Errorf("group %q: GroupConfig.Store is nil (backends need the rendezvous store)", cfg.Name)
	}
	return me, nil
}
