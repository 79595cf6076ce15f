// Package worldtarget runs the bench harness on a symmem.World through the
// user API (package symmem), on any backend: it implements bench.Target on
// the world group. The numbers `symmem bench` publishes therefore come
// through the same validation, locking and path choice as a user's calls.
// It is its own package so that package symmem stays free of bench (and of
// the plotting code bench links).
package worldtarget

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
)

var (
	_ bench.Target      = (*Target)(nil)
	_ bench.AlgoChecker = (*Target)(nil)
	_ bench.Exchanger   = (*Target)(nil)
)

// Target runs the harness on a symmem.World through the user API, on the
// world group.
//
// Symmetric buffers come from a group scope (registered when it ends);
// plain buffers come from World.AllocLocal (Go memory on the CPU backend,
// which the user API stages through the pool; device memory on a GPU,
// which runs on plain NCCL). Out-of-place broadcast is a local copy on the
// root followed by the in-place broadcast of the user API (as NCCL does
// inside its kernel). Writes are complete and visible before they return
// (World.Write), and Barrier is a host rendezvous, so a collective never
// reads input that has not landed.
type Target struct {
	ctx    context.Context
	w      *symmem.World
	g      *symmem.Group
	allocs []symmem.Buffer // sorted by address
}

// New wraps w (local: it allocates nothing). ctx bounds every call.
func New(ctx context.Context, w *symmem.World) (*Target, error) {
	return &Target{ctx: ctx, w: w, g: w.World()}, nil
}

func (t *Target) Rank() int    { return t.g.Rank() }
func (t *Target) Size() int    { return t.g.Size() }
func (t *Target) Name() string { return t.w.Backend() }

// Sync waits for the calls issued on the backend's own stream (GPU).
func (t *Target) Sync() error { return t.w.Synchronize(t.ctx) }

// CheckAlgo accepts the algorithms the backend declares for k.
func (t *Target) CheckAlgo(k coll.Kind, a coll.Algo) error {
	if t.w.Supports(k, a) {
		return nil
	}
	valid := []string{string(coll.AlgoAuto)}
	for _, x := range t.w.Algos(k) {
		valid = append(valid, string(x))
	}
	return fmt.Errorf("algorithm %q is not available for %v on the %s backend (valid: %s): %w",
		a, k, t.w.Backend(), strings.Join(valid, ", "), symmem.ErrNotSupported)
}

// CheckFits checks up front that bytes of symmetric memory fit (World.CheckFits).
func (t *Target) CheckFits(bytes int64) error { return t.w.CheckFits(bytes) }

func (t *Target) Alloc(bytes int64, symmetric bool) (coll.Span, error) {
	var buf symmem.Buffer
	if symmetric {
		sc, err := t.g.OpenScope()
		if err != nil {
			return coll.Span{}, err
		}
		if buf, err = sc.Alloc(bytes); err != nil {
			return coll.Span{}, err
		}
		if err := sc.End(t.ctx); err != nil {
			return coll.Span{}, err
		}
	} else {
		var err error
		if buf, err = t.w.AllocLocal(bytes); err != nil {
			return coll.Span{}, err
		}
	}
	i := sort.Search(len(t.allocs), func(i int) bool { return t.allocs[i].Ptr >= buf.Ptr })
	t.allocs = append(t.allocs, symmem.Buffer{})
	copy(t.allocs[i+1:], t.allocs[i:])
	t.allocs[i] = buf
	return buf.Span, nil
}

func (t *Target) Free(s coll.Span) error {
	for i, a := range t.allocs {
		if a.Ptr == s.Ptr {
			t.allocs = append(t.allocs[:i], t.allocs[i+1:]...)
			return t.w.Free(a)
		}
	}
	return fmt.Errorf("bench: Free of %#x, which this target did not allocate", s.Ptr)
}

// inside checks that s lies inside one allocation.
func (t *Target) inside(s coll.Span) error {
	i := sort.Search(len(t.allocs), func(i int) bool { return t.allocs[i].End() > s.Ptr })
	if i == len(t.allocs) || s.Ptr < t.allocs[i].Ptr || s.End() > t.allocs[i].End() {
		return fmt.Errorf("bench: span %#x+%d is not inside a buffer of this target", s.Ptr, s.Len)
	}
	return nil
}

// bytes is s as a Go slice, through the Buffer it lies in (host memory; s
// passed inside); nil when that buffer was freed.
func (t *Target) bytes(s coll.Span) []byte {
	i := sort.Search(len(t.allocs), func(i int) bool { return t.allocs[i].End() > s.Ptr })
	b := t.allocs[i].Bytes()
	if b == nil {
		return nil
	}
	off := s.Ptr - t.allocs[i].Ptr
	return b[off : off+uint64(s.Len)]
}

func (t *Target) Write(dst coll.Span, src []byte) error {
	s := coll.Span{Ptr: dst.Ptr, Len: int64(len(src))}
	if err := t.inside(s); err != nil {
		return err
	}
	return t.w.Write(t.ctx, s, src)
}

func (t *Target) Read(dst []byte, src coll.Span) error {
	s := coll.Span{Ptr: src.Ptr, Len: int64(len(dst))}
	if err := t.inside(s); err != nil {
		return err
	}
	return t.w.Read(t.ctx, dst, s)
}

// Memcpy copies locally (on the backend's stream on a GPU).
func (t *Target) Memcpy(dst, src coll.Span) error {
	n := min(dst.Len, src.Len)
	d, s := coll.Span{Ptr: dst.Ptr, Len: n}, coll.Span{Ptr: src.Ptr, Len: n}
	if err := t.inside(d); err != nil {
		return err
	}
	if err := t.inside(s); err != nil {
		return err
	}
	if !t.w.HostMemory() {
		return t.w.Copy(d, s, 0)
	}
	threads := t.MemcpyThreads()
	if n < parallelCopy || threads == 1 {
		return t.w.Copy(d, s, 0)
	}
	db, sb := t.bytes(d), t.bytes(s)
	if db == nil || sb == nil {
		return t.w.Copy(d, s, 0) // a freed buffer: the user API says so
	}
	var wg sync.WaitGroup
	per := (n + int64(threads) - 1) / int64(threads)
	for lo := int64(0); lo < n; lo += per {
		hi := min(n, lo+per)
		wg.Go(func() { copy(db[lo:hi], sb[lo:hi]) })
	}
	wg.Wait()
	return nil
}

// parallelCopy is the size from which Memcpy splits its copy over threads.
const parallelCopy = 4 << 20

// MemcpyThreads is how many goroutines Memcpy uses from parallelCopy bytes:
// this rank's share of the CPUs (GOMAXPROCS / local ranks, since every rank
// copies at once). The baseline is then the machine's copy bandwidth,
// whatever number of threads the backend's own copies use.
func (t *Target) MemcpyThreads() int {
	return max(1, runtime.GOMAXPROCS(0)/max(1, t.w.LocalSize()))
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
	case coll.AllToAll:
		return t.g.AllToAll(t.ctx, out, in, dt, o)
	}
	return coll.Path{}, fmt.Errorf("bench: unknown op %v", k)
}

// Barrier is a host rendezvous of the world group.
func (t *Target) Barrier() error { return t.g.Barrier(t.ctx) }

// ExchangeFloat64 shares a few numbers through the store.
func (t *Target) ExchangeFloat64(vals []float64) ([][]float64, error) {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	all, err := t.g.AllGatherHost(t.ctx, b)
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(all))
	for r, v := range all {
		out[r] = make([]float64, len(v)/8)
		for i := range out[r] {
			out[r][i] = math.Float64frombits(binary.LittleEndian.Uint64(v[8*i:]))
		}
	}
	return out, nil
}

// Close frees what the target still holds.
func (t *Target) Close() error {
	var first error
	for len(t.allocs) > 0 {
		if err := t.Free(t.allocs[0].Span); err != nil && first == nil {
			first = err
		}
	}
	return first
}
