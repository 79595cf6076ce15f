package shm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/reduce"
)

// Data work of one stage: copies and reductions, cut into pieces that the
// calling goroutine and a crew of helper goroutines take in turn.
const (
	maxPiece   = 2 << 20 // largest piece handed to a worker (>= 1 MiB: Go's memmove then uses non-temporal stores)
	maxWorkers = 16      // one socket's memory bandwidth takes about 8-16 cores streaming at once
)

// split says how a stage's data work is shared among goroutines.
type split struct {
	workers  int           // goroutines, the caller included
	inline   int           // a stage writing fewer bytes runs on the caller alone
	minPiece int           // smallest piece handed to a worker (a multiple of 64)
	spin     time.Duration // how long an idle helper polls for the next stage before it sleeps
}

// splitFor is the split for a process that shares this host with
// localRanks ranks. Workers: the CPUs divided among the ranks (they all copy
// at once during a collective), at least 1, at most maxWorkers; one core
// streams only a fraction of a socket's bandwidth (about 10-20 GB/s on a
// server core), so reaching it takes many. A stage from 256 KiB up is cut
// into about one piece per worker, at least 64 KiB each (a few
// microseconds of copying), at most maxPiece, so that 1-16 MiB collectives
// use every worker too, not just one core. Idle helpers poll for 200 us
// before they sleep: the stages of back-to-back collectives follow each
// other within microseconds, and waking a sleeping thread can cost tens of
// microseconds on a virtual machine, as long as a 1 MiB stage takes.
func splitFor(localRanks int) split {
	return split{
		workers:  max(1, min(maxWorkers, runtime.GOMAXPROCS(0)/max(localRanks, 1))),
		inline:   256 << 10,
		minPiece: 64 << 10,
		spin:     200 * time.Microsecond,
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

// job is one stage handed to the crew. Pieces are taken with next and
// counted with finished; whoever finishes the last one closes done. A job
// is never reused, so a helper that arrives late finds nothing left to take.
type job struct {
	tasks    []task
	pieces   []piece
	dt       coll.DType
	op       coll.ReduceOp
	next     atomic.Int64
	finished atomic.Int64
	done     chan struct{}
	errMu    sync.Mutex
	err      error
}

// work takes pieces until none is left.
func (j *job) work() {
	for {
		k := int(j.next.Add(1) - 1)
		if k >= len(j.pieces) {
			return
		}
		p := j.pieces[k]
		if err := j.tasks[p.t].run(p.lo, p.hi, j.dt, j.op); err != nil {
			j.errMu.Lock()
			if j.err == nil {
				j.err = err
			}
			j.errMu.Unlock()
		}
		if j.finished.Add(1) == int64(len(j.pieces)) {
			close(j.done)
		}
	}
}

// crew is a group's helper goroutines (split.workers-1 of them), started
// with the first stage that needs them and ended by stop. Between stages
// they poll for split.spin, then sleep on cond until the next stage.
type crew struct {
	s        split
	once     sync.Once
	gen      atomic.Uint64 // stages published; a helper works on the latest
	cur      atomic.Pointer[job]
	sleepers atomic.Int32
	stopped  atomic.Bool
	helpers  sync.WaitGroup
	mu       sync.Mutex
	cond     *sync.Cond
}

func newCrew(s split) *crew {
	c := &crew{s: s}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// helper runs stages as they are published until the crew stops.
func (c *crew) helper() {
	var seen uint64
	for {
		g := c.gen.Load()
		if g == seen {
			g = c.await(seen)
		}
		if c.stopped.Load() {
			return
		}
		seen = g
		c.cur.Load().work()
	}
}

// await returns the stage count once it differs from seen: it polls for
// split.spin, then sleeps. It returns seen when the crew stopped.
func (c *crew) await(seen uint64) uint64 {
	end := time.Now().Add(c.s.spin)
	for k := 0; ; k++ {
		if g := c.gen.Load(); g != seen || c.stopped.Load() {
			return g
		}
		if k&63 == 63 {
			if time.Now().After(end) {
				break
			}
			runtime.Gosched()
		}
	}
	// Sleep. The publisher bumps gen, then reads sleepers; a helper adds
	// itself to sleepers, then reads gen (under mu): one of the two sees
	// the other, so no wakeup is lost.
	c.sleepers.Add(1)
	defer c.sleepers.Add(-1)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if g := c.gen.Load(); g != seen || c.stopped.Load() {
			return g
		}
		c.cond.Wait()
	}
}

// stop ends the helpers and returns once they have returned. The crew is
// not used after stop.
func (c *crew) stop() {
	c.stopped.Store(true)
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
	c.helpers.Wait()
}

// run executes every task: on the caller alone below split.inline bytes
// (or with one worker), else in pieces shared with the helpers.
func (c *crew) run(tasks []task, dt coll.DType, op coll.ReduceOp) error {
	total := 0
	for _, t := range tasks {
		total += len(t.dst)
	}
	if total < c.s.inline || c.s.workers <= 1 {
		for _, t := range tasks {
			if err := t.run(0, len(t.dst), dt, op); err != nil {
				return err
			}
		}
		return nil
	}
	j := &job{tasks: tasks, dt: dt, op: op, done: make(chan struct{})}
	size := c.s.pieceSize(total)
	for i, t := range tasks {
		for lo := 0; lo < len(t.dst); lo += size {
			j.pieces = append(j.pieces, piece{i, lo, min(lo+size, len(t.dst))})
		}
	}
	if len(j.pieces) > 1 {
		c.once.Do(func() {
			c.helpers.Add(c.s.workers - 1)
			for range c.s.workers - 1 {
				go func() {
					defer c.helpers.Done()
					c.helper()
				}()
			}
		})
		c.cur.Store(j)
		c.gen.Add(1)
		if c.sleepers.Load() > 0 {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}
	j.work()
	// The pieces still running on helpers end within a piece's time: poll
	// for that long, then sleep.
	for k := 0; k < 1<<12 && j.finished.Load() < int64(len(j.pieces)); k++ {
		if k&63 == 63 {
			runtime.Gosched()
		}
	}
	<-j.done
	j.errMu.Lock()
	defer j.errMu.Unlock()
	return j.err
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
