package shm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/wait"
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
	spin     time.Duration // how long an idle helper, or the caller waiting for helpers, polls before it sleeps
}

// splitFor is the split for a process that shares this host with
// localRanks ranks. Workers: the CPUs divided among the ranks (they all copy
// at once during a collective), at least 1, at most maxWorkers; one core
// streams only a fraction of a socket's bandwidth (about 10-20 GB/s on a
// server core), so reaching it takes many. A stage from 256 KiB up is cut
// into about two pieces per worker, at least 32 KiB each (a couple of
// microseconds of copying), at most maxPiece: a worker that starts late
// or is slowed by another thread on its CPU takes fewer pieces instead of
// holding up the stage by a whole share. Idle helpers poll for 200 us
// before they sleep: the stages of back-to-back collectives follow each
// other within microseconds, and waking a sleeping thread can cost tens of
// microseconds on a virtual machine, as long as a 1 MiB stage takes.
func splitFor(localRanks int) split {
	return split{
		workers:  max(1, min(maxWorkers, runtime.GOMAXPROCS(0)/max(localRanks, 1))),
		inline:   256 << 10,
		minPiece: 32 << 10,
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
// into: about total/(2*workers), rounded up to 64 bytes (whole elements of
// every dtype, whole cache lines), within [minPiece, maxPiece].
func (s split) pieceSize(total int) int {
	n := 2 * max(s.workers, 1)
	per := ((total+n-1)/n + 63) &^ 63
	return min(max(per, s.minPiece, 64), maxPiece)
}

// crew is a group's helper goroutines (split.workers-1 of them), started
// with the first stage that needs them and ended by stop. Between stages
// they poll for split.spin, then sleep on cond until the next stage.
//
// One stage at a time (the group's runMu): the caller writes the stage
// (tasks, pieces, dt, op) while no piece is outstanding, then publishes it
// through ticket, which holds the stage's piece count (high 32 bits) and
// the next piece to take (low 32 bits). A worker claims piece k by moving
// ticket from n<<32|k to n<<32|k+1 (compare-and-swap), then reads the
// stage: a successful swap means ticket was the current stage's, so piece
// k is that stage's, and the caller cannot rewrite the stage before the
// piece is counted off in left. Nothing is allocated per stage.
type crew struct {
	s    split
	once sync.Once
	// gen is polled by every idle helper; ticket and left are written
	// once per piece: on one cache line, each write would pull the line
	// from every poller.
	_        [64]byte
	gen      atomic.Uint64 // stages published: wakes pollers and sleepers
	_        [56]byte
	ticket   atomic.Uint64
	left     atomic.Int64 // pieces of the current stage not finished
	_        [48]byte
	waiting  atomic.Bool // the caller sleeps on done
	done     chan struct{}
	sleepers atomic.Int32
	stopped  atomic.Bool
	helpers  sync.WaitGroup
	mu       sync.Mutex
	cond     *sync.Cond

	// The current stage.
	tasks  []task
	pieces []piece
	dt     coll.DType
	op     coll.ReduceOp
	errMu  sync.Mutex
	err    error
}

func newCrew(s split) *crew {
	c := &crew{s: s, done: make(chan struct{}, 1)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// work takes pieces of the current stage until none is left.
func (c *crew) work() {
	for {
		t := c.ticket.Load()
		if uint32(t) >= uint32(t>>32) {
			return
		}
		if !c.ticket.CompareAndSwap(t, t+1) {
			continue
		}
		p := c.pieces[uint32(t)]
		if err := c.tasks[p.t].run(p.lo, p.hi, c.dt, c.op); err != nil {
			c.errMu.Lock()
			if c.err == nil {
				c.err = err
			}
			c.errMu.Unlock()
		}
		if c.left.Add(-1) == 0 && c.waiting.Load() {
			select {
			case c.done <- struct{}{}:
			default: // a token is already there
			}
		}
	}
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
		c.work()
	}
}

// await returns the stage count once it differs from seen: it polls for
// split.spin (wait.Spin), then sleeps. It returns seen when the crew stopped.
func (c *crew) await(seen uint64) uint64 {
	var g uint64
	if wait.Spin(c.s.spin, func() bool {
		g = c.gen.Load()
		return g != seen || c.stopped.Load()
	}) {
		return g
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
	size := c.s.pieceSize(total)
	c.pieces = c.pieces[:0]
	for i, t := range tasks {
		for lo := 0; lo < len(t.dst); lo += size {
			c.pieces = append(c.pieces, piece{i, lo, min(lo+size, len(t.dst))})
		}
	}
	n := len(c.pieces)
	if n == 0 {
		return nil
	}
	c.tasks, c.dt, c.op, c.err = tasks, dt, op, nil
	c.left.Store(int64(n))
	c.ticket.Store(uint64(n) << 32)
	if n > 1 {
		c.once.Do(func() {
			c.helpers.Add(c.s.workers - 1)
			for range c.s.workers - 1 {
				go func() {
					defer c.helpers.Done()
					c.helper()
				}()
			}
		})
		c.gen.Add(1)
		if c.sleepers.Load() > 0 {
			c.mu.Lock()
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}
	c.work()
	c.finish()
	c.tasks = nil // keep no reference to the caller's buffers
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// finish returns once every piece of the stage is done. The pieces still
// running on helpers end within a piece's time: poll for up to
// split.spin (wait.Spin), then sleep until the last one is counted off.
func (c *crew) finish() {
	if c.left.Load() == 0 || wait.Spin(c.s.spin, func() bool { return c.left.Load() == 0 }) {
		return
	}
	c.waiting.Store(true)
	for c.left.Load() != 0 {
		<-c.done
	}
	c.waiting.Store(false)
}

// maxInlineSrcs sources fit in a piece's source list on the stack.
const maxInlineSrcs = 8

func (t task) run(lo, hi int, dt coll.DType, op coll.ReduceOp) error {
	if !t.reduce && len(t.srcs) == 1 {
		copy(t.dst[lo:hi], t.srcs[0][lo:hi])
		return nil
	}
	var buf [maxInlineSrcs][]byte
	srcs := buf[:0]
	if len(t.srcs) > maxInlineSrcs {
		srcs = make([][]byte, 0, len(t.srcs))
	}
	for _, s := range t.srcs {
		srcs = append(srcs, s[lo:hi])
	}
	// Avg: Finish divides each reduced piece by the number of sources.
	// dst may alias one of the sources (in place): ReduceN allows that.
	if err := reduce.ReduceN(t.dst[lo:hi], srcs, dt, op); err != nil {
		return err
	}
	return reduce.Finish(t.dst[lo:hi], dt, op, len(srcs))
}
