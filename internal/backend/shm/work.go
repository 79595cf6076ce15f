package shm

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// Data work of one step: copies and reductions, split into chunks that a few
// worker goroutines take in turn.
const (
	chunkBytes  = 2 << 20 // unit of work handed to a worker (>= 1 MiB: Go's memmove then uses non-temporal stores)
	maxWorkers  = 16      // one socket's memory bandwidth takes about 8-16 cores streaming at once
	inlineBytes = 4 << 20 // below this a step runs on the calling goroutine
)

// task writes dst from srcs: a copy when len(srcs) == 1 and !reduce,
// otherwise dst = srcs[0] op srcs[1] ... (reduce.ReduceN), divided by
// len(srcs) for Avg (reduce.Finish).
type task struct {
	dst    []byte
	srcs   [][]byte
	reduce bool
}

type piece struct {
	t      int
	lo, hi int
}

// workersFor is the worker count for a process that shares this host with
// localRanks ranks: the CPUs divided among the ranks (they all copy at once
// during a collective), at least 1, at most maxWorkers. A step uses at most
// one worker per 2 MiB piece, so smaller steps use fewer. The reductions run
// at memory speed per core (reduce's vector kernels), so reaching a host's
// bandwidth takes many cores, not few. (Parallel pieces from 512 KiB, sized
// to the workers, measured no better on a 16-core host: results/
// cpu-compare-2026-11-23.md.)
func workersFor(localRanks int) int {
	return max(1, min(maxWorkers, runtime.GOMAXPROCS(0)/max(localRanks, 1)))
}

// runTasks executes every task, in chunks, on up to workers goroutines.
func runTasks(tasks []task, dt coll.DType, op coll.ReduceOp, workers int) error {
	total := 0
	for _, t := range tasks {
		total += len(t.dst)
	}
	if total < inlineBytes || workers <= 1 {
		for _, t := range tasks {
			if err := t.run(0, len(t.dst), dt, op); err != nil {
				return err
			}
		}
		return nil
	}
	// Chunk boundaries fall on multiples of 64 bytes (whole elements of
	// every dtype, whole cache lines).
	var pieces []piece
	for i, t := range tasks {
		for lo := 0; lo < len(t.dst); lo += chunkBytes {
			pieces = append(pieces, piece{i, lo, min(lo+chunkBytes, len(t.dst))})
		}
	}
	workers = min(workers, len(pieces))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	work := func(w int) {
		defer wg.Done()
		for {
			k := int(next.Add(1) - 1)
			if k >= len(pieces) {
				return
			}
			p := pieces[k]
			if err := tasks[p.t].run(p.lo, p.hi, dt, op); err != nil && errs[w] == nil {
				errs[w] = err
			}
		}
	}
	wg.Add(workers)
	for w := 1; w < workers; w++ {
		go work(w)
	}
	work(0)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (t task) run(lo, hi int, dt coll.DType, op coll.ReduceOp) error {
	if !t.reduce && len(t.srcs) == 1 {
		copy(t.dst[lo:hi], t.srcs[0][lo:hi])
		return nil
	}
	srcs := make([][]byte, len(t.srcs))
	for i, s := range t.srcs {
		srcs[i] = s[lo:hi]
	}
	// Avg: Finish divides each reduced piece by the number of sources.
	// dst may alias one of the sources (in place): ReduceN allows that.
	if err := reduce.ReduceN(t.dst[lo:hi], srcs, dt, op); err != nil {
		return err
	}
	return reduce.Finish(t.dst[lo:hi], dt, op, len(srcs))
}
