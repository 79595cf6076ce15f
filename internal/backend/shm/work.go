package shm

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// Data work of one stage: copies and reductions, cut into pieces that a few
// worker goroutines take in turn.
const (
	maxPiece   = 2 << 20 // largest piece handed to a worker (>= 1 MiB: Go's memmove then uses non-temporal stores)
	maxWorkers = 16      // one socket's memory bandwidth takes about 8-16 cores streaming at once
)

// split says how a stage's data work is shared among goroutines.
type split struct {
	workers  int // goroutines, the caller included
	inline   int // a stage writing fewer bytes runs on the caller alone
	minPiece int // smallest piece handed to a worker (a multiple of 64)
}

// splitFor is the split for a process that shares this host with
// localRanks ranks. Workers: the CPUs divided among the ranks (they all copy
// at once during a collective), at least 1, at most maxWorkers; one core
// streams only a fraction of a socket's bandwidth (about 10-20 GB/s on a
// server core), so reaching it takes many. A stage from 256 KiB up is cut
// into about one piece per worker, at least 64 KiB each (a few
// microseconds of copying, more than starting a goroutine costs), at most
// maxPiece, so that 1-16 MiB collectives use every worker too, not just one
// core.
func splitFor(localRanks int) split {
	return split{
		workers:  max(1, min(maxWorkers, runtime.GOMAXPROCS(0)/max(localRanks, 1))),
		inline:   256 << 10,
		minPiece: 64 << 10,
	}
}

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

// pieceSize is the length of the pieces a stage writing total bytes is cut
// into: about total/workers, rounded up to 64 bytes (whole elements of
// every dtype, whole cache lines), within [minPiece, maxPiece].
func (s split) pieceSize(total int) int {
	w := max(s.workers, 1)
	per := ((total+w-1)/w + 63) &^ 63
	return min(max(per, s.minPiece, 64), maxPiece)
}

// runTasks executes every task, in pieces, on up to s.workers goroutines.
func runTasks(tasks []task, dt coll.DType, op coll.ReduceOp, s split) error {
	total := 0
	for _, t := range tasks {
		total += len(t.dst)
	}
	if total < s.inline || s.workers <= 1 {
		for _, t := range tasks {
			if err := t.run(0, len(t.dst), dt, op); err != nil {
				return err
			}
		}
		return nil
	}
	size := s.pieceSize(total)
	var pieces []piece
	for i, t := range tasks {
		for lo := 0; lo < len(t.dst); lo += size {
			pieces = append(pieces, piece{i, lo, min(lo+size, len(t.dst))})
		}
	}
	workers := min(s.workers, len(pieces))
	if workers <= 1 {
		for _, p := range pieces {
			if err := tasks[p.t].run(p.lo, p.hi, dt, op); err != nil {
				return err
			}
		}
		return nil
	}
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
