// Package backend is the contract between the user API (package symmem) and
// the backends that move data: internal/backend/shm (CPU shared memory) and
// internal/backend/cuda (GPUs, with internal/backend/nccl). A backend supplies segments to the
// shared pool, groups that register segments and verify agreement, and the
// execution of collective requests.
package backend

import (
	"context"
	"fmt"
	"github.com/symmem/symmem/internal/errs"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// Backend is one kind of memory and transport. Everything the user API
// asks of a backend is in this interface and in Capabilities: it never
// tests which backend it holds.
type Backend interface {
	Name() string
	// Capabilities declares what the backend offers (constant for its
	// lifetime).
	Capabilities() Capabilities
	// Provider supplies the segments of this process's one pool.
	Provider() pool.Provider
	// NewGroup creates the backend side of a group. It is collective over
	// cfg.Ranks.
	NewGroup(ctx context.Context, cfg GroupConfig) (Group, error)
	// Describe reports the backend's hardware and groups in a few lines
	// (`symmem doctor`).
	Describe() string
	Close() error
}

// Capabilities are the declared parts of a backend that differ between
// backends.
type Capabilities struct {
	// Algos lists, per collective, the algorithms a call may force with
	// Request.Algo besides coll.AlgoAuto. Any other algorithm is
	// errs.NotSupported before the backend sees the call.
	Algos map[coll.Kind][]coll.Algo
	// Calls declares how the backend's groups agree on each collective's
	// record (Request.Record): agree.CallsInBand (Run compares it before any
	// data moves and fails with a *agree.Disagreement, which the user API
	// names) or agree.CallsByDigest (the backend's kernels and call gate
	// compare it and name a difference themselves). Records outside a call
	// (scope ends, empty calls) are compared through Group's Agreer, or
	// through the store where it is nil; checked mode exchanges every
	// call's record through the store on any backend.
	Calls agree.Calls
	// Device is nil when buffers are host memory (Buffer.Bytes works,
	// calls complete before they return, ordinary memory is staged through
	// the pool by the user API). Otherwise buffers live on a device and the
	// backend supplies the operations a caller needs to move data in and
	// out and to order work.
	Device Device
}

// Supports reports whether a may be forced for k (auto always may).
func (c Capabilities) Supports(k coll.Kind, a coll.Algo) bool {
	if a == coll.AlgoAuto || a == "" {
		return true
	}
	for _, x := range c.Algos[k] {
		if x == a {
			return true
		}
	}
	return false
}

// Device is the part of the contract a backend with device memory adds.
// Addresses are device virtual addresses in this process.
type Device interface {
	// Synchronize waits (bounded by timeout) until the work enqueued on
	// the backend's own stream has completed.
	Synchronize(ctx context.Context, timeout time.Duration) error
	// Fence returns a completion marker for the work enqueued so far on
	// stream (0: the backend's own); the pool waits for it before it hands
	// freed bytes out again.
	Fence(stream uint64) (pool.Fence, error)
	// Write copies src to dst. When it returns, the bytes are in device
	// memory and visible to every stream and every peer process: a peer
	// told through the host may read them at once.
	Write(ctx context.Context, dst uint64, src []byte) error
	// Read copies len(dst) bytes from src after the work enqueued on the
	// backend's own stream has completed.
	Read(ctx context.Context, dst []byte, src uint64) error
	// Copy enqueues a local device-to-device copy of n bytes on stream (0:
	// the backend's own).
	Copy(dst, src uint64, n int64, stream uint64) error
	// AllocLocal returns ordinary device memory outside the pool (not
	// symmetric); FreeLocal releases it after the backend's stream is idle.
	AllocLocal(bytes int64) (uint64, error)
	FreeLocal(ptr uint64) error
	// Ordinal is the device's index in this process (the CUDA ordinal).
	Ordinal() int
	// CheckLocal returns an error wrapping errs.Invalid that says what ptr
	// is when it is not memory of this device (nil when it cannot tell).
	// The user API asks it for a call's ordinary buffers, which kernels
	// and NCCL read on this device, before the call reaches any peer.
	CheckLocal(ptr uint64) error
}

// GroupConfig describes a group of ranks to a backend.
type GroupConfig struct {
	Name    string
	Ranks   []int // global ranks of the members, ascending
	Rank    int   // this process's global rank (a member of Ranks)
	Store   *rendezvous.Client
	FDs     *rendezvous.FDExchange // local fd passing; nil when unused
	Timeout time.Duration          // bound on every wait; > 0 (Index)
	Gen     int                    // the name's generation (Generation), alike on every member
}

// Sym locates a span inside a symmetric block that is registered with the
// group executing the request. OK is false for ordinary memory.
type Sym struct {
	OK  bool
	Seg pool.SegmentID
	Off int64 // byte offset of the span's first byte within the segment
}

// Request is one collective call, already validated by the user API, with
// its shape computed once (Shaped): backends read In.Len, Out.Len and
// InPlace instead of deriving them again.
//
// Counts are elements. For AllGather, In holds Count elements and Out holds
// Count*Size; in-place is In == Out[rank*Count:]. For ReduceScatter, In holds
// Count*Size and Out holds Count. AllReduce and Broadcast use Count for both
// (Broadcast works in Out only: In is Out). AllToAll is out of place and
// has three forms (Request.Splits): equal blocks, where In and Out hold
// Count*Size elements (Count per peer, block j of In goes to rank j);
// host split counts; split counts in symmetric memory.
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
	// InPlace: the input is this rank's slice of the output (AllGather),
	// the output is this rank's chunk of the input (ReduceScatter), In is
	// Out (AllReduce); always true for Broadcast.
	InPlace bool
	// Record is the call's record (agree.CallRecord): the call as every
	// rank must make it. How the backend compares it is declared in
	// Capabilities.Calls. The zero value compares nothing.
	Record agree.Record
	// Checked: the user asked for checked mode (Options.Checked), where
	// backends add the checks that cost time on every call (the GPU
	// backend's handshake beside copy-engine and NCCL calls).
	Checked bool
	// A2A is an AllToAll's split counts: nil for the equal form and for
	// the other kinds. A pointer: the request travels by value through
	// every backend's call route, and the splits would double its size.
	A2A *Splits
}

// SplitForm is which form of all-to-all a request is.
type SplitForm uint8

const (
	// SplitsEqual: Count elements to and from every rank.
	SplitsEqual SplitForm = iota
	// SplitsHost: Send and Recv, on the host, give the elements to and
	// from each group rank; the blocks are packed in rank order in In and
	// Out, whose lengths are the sums. Count is 0.
	SplitsHost
	// SplitsDevice: Dev (Size() int64, symmetric) holds the elements this
	// rank sends to each group rank, written before the call; the call
	// writes the elements received from each rank, then each block's
	// element offset in Out (packed in rank order), into DevOut (2*Size()
	// int64, symmetric). In and Out are capacities: a count that would
	// read past In or write past Out fails the call on every rank before
	// any data moves. Count is 0.
	SplitsDevice
)

func (f SplitForm) String() string {
	switch f {
	case SplitsEqual:
		return "equal"
	case SplitsHost:
		return "host splits"
	case SplitsDevice:
		return "device splits"
	}
	return fmt.Sprintf("splits(%d)", uint8(f))
}

// Kind is the form of the split counts s points to (nil: equal blocks).
func (s *Splits) Kind() SplitForm {
	if s == nil {
		return SplitsEqual
	}
	return s.Form
}

// Splits is an AllToAll's split counts (Request.A2A), in elements.
type Splits struct {
	Form       SplitForm
	Send, Recv []int64 // SplitsHost: per group rank, validated by the user API (>= 0, sums fit In and Out)
	// Lo and Hi (SplitsHost, Hi > 0): move only elements [Lo, Hi) of
	// every block, packed in In and Out as if the counts were clipped to
	// that window; Send and Recv are still checked whole. The user API's
	// staging of ordinary host memory runs rounds this way.
	Lo, Hi    int64
	Dev       coll.Span
	DevOut    coll.Span
	DevSym    Sym
	DevOutSym Sym
}

// IOBytes is the bytes a collective of kind k on count elements of dt
// reads from In and writes to Out in a group of n ranks.
func IOBytes(k coll.Kind, dt coll.DType, count int64, n int) (in, out int64) {
	one := count * int64(dt.Size())
	switch k {
	case coll.AllGather:
		return one, one * int64(n)
	case coll.ReduceScatter:
		return one * int64(n), one
	case coll.AllToAll:
		return one * int64(n), one * int64(n)
	}
	return one, one
}

// Shaped returns r with its shape computed for group rank rank of n: In
// and Out trimmed to the bytes the collective touches (Broadcast: In is
// Out) and InPlace set. An all-to-all with split counts keeps the lengths
// the user API gave (the sums, or the capacities). The user API calls it
// once per call.
func (r Request) Shaped(n, rank int) Request {
	if r.Kind == coll.AllToAll && r.A2A.Kind() != SplitsEqual {
		return r
	}
	in, out := IOBytes(r.Kind, r.DType, r.Count, n)
	if r.Kind == coll.Broadcast {
		r.In, r.InSym = r.Out, r.OutSym
	}
	r.In.Len, r.Out.Len = in, out
	switch r.Kind {
	case coll.AllToAll: // out of place only
	case coll.AllGather:
		r.InPlace = r.In.Ptr == r.Out.Ptr+uint64(int64(rank)*in)
	case coll.ReduceScatter:
		r.InPlace = r.Out.Ptr == r.In.Ptr+uint64(int64(rank)*out)
	default:
		r.InPlace = r.In.Ptr == r.Out.Ptr
	}
	return r
}

// Group is the backend side of one group. Its Agreer (pool.Group) is
// declared per group: the in-band comparison of records outside a call
// (scope ends, empty calls), nil where the group has none (the GPU
// backend's ranks on several hosts: the store then).
type Group interface {
	pool.Group
	// Run executes req. Backends that need symmetric buffers for a path say
	// so in the returned error; the user API stages ordinary memory first.
	Run(ctx context.Context, req Request) (coll.Path, error)
	// Explain reports the path Run would take for req and why, without
	// running anything; symmetric spans (Sym.OK) are taken as registered.
	Explain(req Request) coll.Path
	// Leave tells the peers that this rank is closing the group (before the
	// collective teardown): a peer waiting for this rank in a call of the
	// group fails at once with errs.PeerClosed instead of waiting out its
	// timeout. It cannot be undone: the group is only good for Close after.
	Leave()
	Close() error
}

// Index validates cfg (ranks ascending without repeats, this rank a member,
// a store present, a timeout) and returns this rank's index in Ranks, its
// group rank. The timeout is the user API's, defaulted once there: a
// backend does not default it again.
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
	case cfg.Timeout <= 0:
		return -1, fmt.Errorf("group %q: GroupConfig.Timeout is %v: it bounds every wait of the group and must be > 0: %w", cfg.Name, cfg.Timeout, errs.Invalid)
	}
	return me, nil
}
