// Package worldtarget runs the bench harness on a symmem.World through the
// user API (package symmem): it implements bench.Target on the world group.
// It is its own package so that package bench stays free of the user API
// (backends import bench for their own Targets).
package worldtarget

import (
	"context"
	"fmt"
	"sort"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
)

// Target runs the harness on a symmem.World through the user API, on
// the world group. It needs host memory (the CPU backend); a device backend
// brings its own Target.
//
// Symmetric buffers come from a group scope (registered when it ends);
// plain buffers are Go memory, which the user API stages through the pool.
// Out-of-place broadcast is a local copy on the root followed by the
// in-place broadcast of the user API (as NCCL does inside its kernel).
var (
	_ bench.Target      = (*Target)(nil)
	_ bench.AlgoChecker = (*Target)(nil)
)

type Target struct {
	ctx    context.Context
	w      *symmem.World
	g      *symmem.Group
	allocs []hostAlloc // sorted by address
	barIn  coll.Span
	barOut coll.Span
}

type hostAlloc struct {
	span coll.Span
	mem  []byte
	buf  *symmem.Buffer // nil for plain memory
}

// New wraps w (collective: it allocates a small symmetric
// buffer for barriers). ctx bounds every call.
func New(ctx context.Context, w *symmem.World) (*Target, error) {
	t := &Target{ctx: ctx, w: w, g: w.World()}
	var err error
	if t.barIn, err = t.Alloc(8, true); err != nil {
		return nil, err
	}
	if t.barOut, err = t.Alloc(int64(8*t.g.Size()), true); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Target) Rank() int    { return t.g.Rank() }
func (t *Target) Size() int    { return t.g.Size() }
func (t *Target) Name() string { return t.w.Backend() }
func (t *Target) Sync() error  { return nil } // CPU calls complete before returning

// CheckAlgo accepts what the backend offers: the CPU backend has auto and
// direct.
func (t *Target) CheckAlgo(k coll.Kind, a coll.Algo) error {
	if t.w.Backend() == "cpu" && a != coll.AlgoAuto && a != coll.AlgoDirect {
		return fmt.Errorf("algorithm %q is not available on the cpu backend (valid: auto, direct): %w", a, symmem.ErrNotSupported)
	}
	return nil
}

// CheckFits checks up front that bytes of symmetric memory fit (World.CheckFits).
func (t *Target) CheckFits(bytes int64) error { return t.w.CheckFits(bytes) }

func (t *Target) Alloc(bytes int64, symmetric bool) (coll.Span, error) {
	a := hostAlloc{}
	if symmetric {
		sc, err := t.g.OpenScope()
		if err != nil {
			return coll.Span{}, err
		}
		buf, err := sc.Alloc(bytes)
		if err != nil {
			return coll.Span{}, err
		}
		if err := sc.End(t.ctx); err != nil {
			return coll.Span{}, err
		}
		if a.mem = buf.Bytes(); a.mem == nil {
			t.w.Free(buf)
			return coll.Span{}, fmt.Errorf("bench: backend %s does not give host memory; it needs its own bench.Target", t.w.Backend())
		}
		a.span, a.buf = buf.Span, &buf
	} else {
		a.mem = make([]byte, bytes)
		a.span = symmem.HostSpan(a.mem)
	}
	i := sort.Search(len(t.allocs), func(i int) bool { return t.allocs[i].span.Ptr >= a.span.Ptr })
	t.allocs = append(t.allocs, hostAlloc{})
	copy(t.allocs[i+1:], t.allocs[i:])
	t.allocs[i] = a
	return a.span, nil
}

func (t *Target) Free(s coll.Span) error {
	for i, a := range t.allocs {
		if a.span.Ptr == s.Ptr {
			t.allocs = append(t.allocs[:i], t.allocs[i+1:]...)
			if a.buf != nil {
				return t.w.Free(*a.buf)
			}
			return nil
		}
	}
	return fmt.Errorf("bench: Free of %#x, which this target did not allocate", s.Ptr)
}

// mem returns the host bytes of s, which must lie inside one allocation.
func (t *Target) mem(s coll.Span) ([]byte, error) {
	i := sort.Search(len(t.allocs), func(i int) bool { return t.allocs[i].span.End() > s.Ptr })
	if i == len(t.allocs) || s.Ptr < t.allocs[i].span.Ptr || s.End() > t.allocs[i].span.End() {
		return nil, fmt.Errorf("bench: span %#x+%d is not inside a buffer of this target", s.Ptr, s.Len)
	}
	a := t.allocs[i]
	off := s.Ptr - a.span.Ptr
	return a.mem[off : off+uint64(s.Len)], nil
}

func (t *Target) Write(dst coll.Span, src []byte) error {
	b, err := t.mem(coll.Span{Ptr: dst.Ptr, Len: int64(len(src))})
	if err == nil {
		copy(b, src)
	}
	return err
}

func (t *Target) Read(dst []byte, src coll.Span) error {
	b, err := t.mem(coll.Span{Ptr: src.Ptr, Len: int64(len(dst))})
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (t *Target) Memcpy(dst, src coll.Span) error {
	n := min(dst.Len, src.Len)
	d, err := t.mem(coll.Span{Ptr: dst.Ptr, Len: n})
	if err != nil {
		return err
	}
	s, err := t.mem(coll.Span{Ptr: src.Ptr, Len: n})
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (t *Target) Run(k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (coll.Path, error) {
	o := symmem.WithAlgo(algo)
	switch k {
	case coll.AllGather:
		return t.g.AllGather(t.ctx, out, in, dt, o)
	case coll.ReduceScatter:
		return t.g.ReduceScatter(t.ctx, out, in, dt, op, o)
	case coll.AllReduce:
		return t.g.AllReduce(t.ctx, out, in, dt, op, o)
	case coll.Broadcast:
		if in != out && t.Rank() == root {
			if err := t.Memcpy(out, in); err != nil {
				return coll.Path{}, err
			}
		}
		return t.g.Broadcast(t.ctx, out, root, dt, o)
	}
	return coll.Path{}, fmt.Errorf("bench: unknown op %v", k)
}

// Barrier is a one-word all-gather: no rank returns before every rank
// has contributed.
func (t *Target) Barrier() error {
	_, err := t.g.AllGather(t.ctx, t.barOut, t.barIn, coll.Float64)
	return err
}

// Close frees the barrier buffers.
func (t *Target) Close() error {
	t.Free(t.barOut)
	return t.Free(t.barIn)
}
