package bench

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/symmem/symmem/coll"
)

// Target is one rank of a job as the harness sees it. All methods are called
// from one goroutine. Collective methods (Run, Barrier) must be called by
// every rank in the same order; the harness guarantees that.
type Target interface {
	Rank() int
	Size() int
	// Name names the backend ("cpu", "cuda"), printed in reports.
	Name() string
	// Alloc returns bytes of memory the backend can address. symmetric asks
	// for a buffer at the same pool offset on every rank (registered with
	// the group, so direct paths apply); otherwise ordinary memory (the
	// backend stages it). Alloc with symmetric=true is collective.
	Alloc(bytes int64, symmetric bool) (coll.Span, error)
	Free(coll.Span) error
	// Write copies src into dst[:len(src)]; Read copies src[:len(dst)] into dst.
	Write(dst coll.Span, src []byte) error
	Read(dst []byte, src coll.Span) error
	// Run issues one collective with the layout of backend.Request: count is
	// the per-rank count for AllGather (out holds count*Size), the output
	// count for ReduceScatter (in holds count*Size), and the full count for
	// AllReduce and Broadcast (Broadcast reads in on root, writes out on
	// every rank; in may equal out). It may return before the work is done
	// on asynchronous backends; Sync waits.
	Run(k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (coll.Path, error)
	// Sync waits until all issued work completed (GPU); no-op on CPU.
	Sync() error
	// Barrier returns once every rank has entered it.
	Barrier() error
	// Memcpy copies min(dst.Len, src.Len) bytes locally (same device); it is
	// the baseline the collectives are compared with. Asynchronous like Run.
	Memcpy(dst, src coll.Span) error
}

// Grapher is optional: a Target on a GPU captures calls into a CUDA graph,
// for -G (how decode loops issue collectives: one graph launch replays many
// calls). Capture is collective like Run: every rank captures the same calls.
type Grapher interface {
	// Capture records calls identical calls of Run (same arguments) into
	// one graph on a stream of the target's own.
	Capture(calls int, k coll.Kind, out, in coll.Span, count int64, dt coll.DType, op coll.ReduceOp, root int, algo coll.Algo) (Graph, error)
}

// Graph is a captured sequence of calls.
type Graph interface {
	Replay() error // enqueue one launch of the graph (asynchronous)
	Wait() error   // wait until every launch enqueued so far completed
	Close() error  // free the graph and its stream
}

// MemcpyThreader is optional: a Target whose Memcpy runs on several threads
// says how many, and the report labels the baseline with it.
type MemcpyThreader interface {
	MemcpyThreads() int
}

// Exchanger is optional: a Target that has a cheaper or more robust way to
// share a few numbers between ranks (a store) implements it. Otherwise the
// harness all-gathers float64 values with the Target's own Run.
type Exchanger interface {
	// ExchangeFloat64 returns every rank's vals, indexed by rank.
	ExchangeFloat64(vals []float64) ([][]float64, error)
}

// exchanger all-gathers small float64 vectors through the target.
type exchanger struct {
	t       Target
	k       int // values per rank
	in, out coll.Span
	buf     []byte
}

func newExchanger(t Target, k int) (*exchanger, error) {
	in, err := t.Alloc(int64(8*k), true)
	if err != nil {
		return nil, fmt.Errorf("bench: allocating exchange buffer: %w", err)
	}
	out, err := t.Alloc(int64(8*k*t.Size()), true)
	if err != nil {
		t.Free(in)
		return nil, fmt.Errorf("bench: allocating exchange buffer: %w", err)
	}
	return &exchanger{t: t, k: k, in: in, out: out, buf: make([]byte, 8*k*t.Size())}, nil
}

func (e *exchanger) close() {
	e.t.Free(e.in)
	e.t.Free(e.out)
}

// exchange returns every rank's vals (len(vals) must be e.k).
func (e *exchanger) exchange(vals []float64) ([][]float64, error) {
	if x, ok := e.t.(Exchanger); ok {
		return x.ExchangeFloat64(vals)
	}
	if len(vals) != e.k {
		return nil, fmt.Errorf("bench: exchange of %d values, want %d", len(vals), e.k)
	}
	mine := e.buf[:8*e.k]
	for i, v := range vals {
		binary.LittleEndian.PutUint64(mine[8*i:], math.Float64bits(v))
	}
	if err := e.t.Write(e.in, mine); err != nil {
		return nil, err
	}
	if _, err := e.t.Run(coll.AllGather, e.out, e.in, int64(e.k), coll.Float64, coll.Sum, 0, coll.AlgoAuto); err != nil {
		return nil, fmt.Errorf("bench: exchanging results between ranks: %w", err)
	}
	if err := e.t.Sync(); err != nil {
		return nil, err
	}
	if err := e.t.Read(e.buf, e.out); err != nil {
		return nil, err
	}
	all := make([][]float64, e.t.Size())
	for r := range all {
		all[r] = make([]float64, e.k)
		for i := range all[r] {
			all[r][i] = math.Float64frombits(binary.LittleEndian.Uint64(e.buf[8*(r*e.k+i):]))
		}
	}
	return all, nil
}
