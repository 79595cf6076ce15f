package wait

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/native/hostmem"
)

// Defaults of Options.
const (
	// ClockEvery and YieldEvery are the spin's cadence: it reads the clock
	// every ClockEvery polls and yields (runtime.Gosched) every YieldEvery.
	// Each costs tens of nanoseconds, so done more often they delay seeing
	// the condition. Yields are rare: a Gosched goes through the
	// scheduler's global run queue, under one lock, and with 8-16
	// goroutines of a process polling at once (the CPU backend's crew on a
	// many-core host) yielding every few polls queued them all on that
	// lock. The Go runtime preempts a goroutine that polls for long anyway;
	// the rare yield only lets other goroutines in where a process has
	// fewer Ps than goroutines (ranks as goroutines in tests).
	ClockEvery = 64
	YieldEvery = 1 << 14

	// Slice is the longest futex sleep between two looks at ctx, the
	// deadline and Options.Check (the liveness of a peer that died without
	// waking the sleeper).
	Slice = 20 * time.Millisecond

	// Nap and MaxNap bound the sleeps of a wait without a futex word: the
	// first sleep is Nap, each next one twice the last, at most MaxNap.
	Nap    = time.Microsecond
	MaxNap = time.Millisecond
)

// Options say how Until waits: a spin phase, then sleeps (on a futex word,
// or naps), each step bounded by the clock. The zero value spins not at
// all and naps from Nap to MaxNap, bounded by ctx only.
type Options struct {
	// The spin phase polls the condition until Spin has passed (measured
	// from the first clock read, ClockEvery polls in) or Rounds polls were
	// made, whichever bound is set and comes first; neither set: no spin.
	// It reads no clock before ClockEvery polls, so a condition met at
	// once costs no clock read. ClockEvery and YieldEvery (0: the package
	// defaults) set its cadence; YieldEvery 1 yields after every poll.
	Spin       time.Duration
	Rounds     int
	ClockEvery int
	YieldEvery int

	// The sleep phase is bounded by ctx and by a deadline: *Deadline if it
	// is set; else, with Timeout > 0, the first sleep sets it to Timeout
	// from then (into *Deadline when given, so that waits sharing it share
	// one bound); else ctx alone bounds the wait.
	Timeout  time.Duration
	Deadline *time.Time

	// Futex, when non-zero, is the address of a 32-bit word (shared
	// memory: hostmem.FutexWait) that whoever makes the condition true
	// changes and wakes: each sleep blocks while the word holds what it
	// held before the condition was last found false, for at most Slice
	// (0: the package default) and the time left. Sleepers, when
	// non-zero, is the address of a 32-bit count of the word's sleepers,
	// raised around each sleep so that the waker may skip the wake when it
	// is zero (it must change the word, then read the count).
	Futex    uint64
	Sleepers uint64
	Slice    time.Duration

	// Target, when Until's cond is nil, is the condition: the word at Futex
	// reached Target, a counter that only grows compared wrap-aware
	// (int32(word-Target) >= 0), as the CPU backend's signal pads are. The
	// spin then polls the word itself, without a call per poll: a call per
	// poll is a noticeable share of a small CPU collective's time.
	Target uint32

	// Without Futex each sleep is a nap: Nap first (0: the package
	// default), twice the last one after, at most MaxNap (0: the package
	// default; below Nap: Nap), cut to the time left. A nap ends early
	// when ctx is done or Wake is closed or receives.
	Nap    time.Duration
	MaxNap time.Duration
	Wake   <-chan struct{}

	// Check runs before every sleep, after the condition was found false:
	// ctxErr is ctx's error (context.DeadlineExceeded once ctx's deadline
	// has passed by the clock, even before ctx says so), expired whether
	// the deadline passed. It returns why the wait ends now (the caller's
	// words for ctx, the deadline, a peer that is gone), or nil to sleep.
	// When it returns nil although ctxErr != nil or expired, Until returns
	// ctxErr, else context.DeadlineExceeded.
	Check func(ctxErr error, expired bool) error
}

// Until returns nil once cond reports done, or cond's error at once. It
// polls cond as Options say: first in a spin, then before and after every
// sleep. Until the wait ends for ctx or the deadline it sleeps again; an
// error of Check (or the end of ctx or the deadline) ends it, unless cond,
// asked once more, reports done (or fails) then: a peer that made the
// condition true and then left is no failure. A futex error other than the
// timeout ends it too.
//
// With cond nil the condition is that the word at Options.Futex reached
// Options.Target. cond runs on the caller's goroutine only; Check too. Until allocates
// nothing unless it naps with ctx or Wake to watch (one timer).
func Until(ctx context.Context, cond func() (bool, error), o *Options) error {
	if cond == nil {
		if o.Futex == 0 {
			return errors.New("wait.Until: no condition (cond nil and no Futex word to reach Target)")
		}
		w, target := hostmem.Uint32At(o.Futex), o.Target
		if spinCounter(w, target, o.Spin, o.Rounds, o.ClockEvery, o.YieldEvery) {
			return nil
		}
		cond = func() (bool, error) { return Reached(atomic.LoadUint32(w), target), nil }
	} else if ok, err := spin(cond, o.Spin, o.Rounds, o.ClockEvery, o.YieldEvery); ok || err != nil {
		return err
	}
	return sleep(ctx, cond, o)
}

// sleep is Until's sleep phase (apart, so that a wait met in the spin
// pays for none of its set-up).
func sleep(ctx context.Context, cond func() (bool, error), o *Options) error {
	var own time.Time
	deadline := o.Deadline
	if deadline == nil {
		deadline = &own
	}
	nap, maxNap := o.Nap, o.MaxNap
	if nap <= 0 {
		nap = Nap
	}
	if maxNap <= 0 {
		maxNap = MaxNap
	}
	maxNap = max(maxNap, nap)
	slice := o.Slice
	if slice <= 0 {
		slice = Slice
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if ok, err := cond(); ok || err != nil {
			return err
		}
		now := time.Now()
		if deadline.IsZero() && o.Timeout > 0 {
			*deadline = now.Add(o.Timeout)
		}
		left := time.Duration(math.MaxInt64)
		if !deadline.IsZero() {
			left = deadline.Sub(now)
		}
		ctxErr := ctx.Err()
		if d, ok := ctx.Deadline(); ok {
			if ctxErr == nil && !now.Before(d) {
				ctxErr = context.DeadlineExceeded
			}
			left = min(left, d.Sub(now))
		}
		expired := !deadline.IsZero() && !now.Before(*deadline)
		var err error
		if o.Check != nil {
			err = o.Check(ctxErr, expired)
		}
		if err == nil {
			if ctxErr != nil {
				err = ctxErr
			} else if expired {
				err = context.DeadlineExceeded
			}
		}
		if err != nil {
			if ok, cerr := cond(); ok || cerr != nil {
				return cerr
			}
			return err
		}
		if o.Futex != 0 {
			if err := sleepFutex(cond, o.Futex, o.Sleepers, min(left, slice)); err != nil {
				return err
			}
			continue
		}
		d := min(nap, left)
		nap = min(2*nap, maxNap)
		done := ctx.Done()
		if done == nil && o.Wake == nil {
			time.Sleep(d)
			continue
		}
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-done:
		case <-o.Wake:
		}
	}
}

// sleepFutex sleeps on the word at addr for at most d unless cond is met:
// it counts itself into the sleepers first, then reads the word, then asks
// cond, so that a waker that changes the word after cond looked either
// finds the sleeper counted or changed the word before it was read (the
// futex then does not sleep).
func sleepFutex(cond func() (bool, error), addr, sleepers uint64, d time.Duration) error {
	if sleepers != 0 {
		atomic.AddUint32(hostmem.Uint32At(sleepers), 1)
		defer atomic.AddUint32(hostmem.Uint32At(sleepers), ^uint32(0))
	}
	v := atomic.LoadUint32(hostmem.Uint32At(addr))
	if ok, err := cond(); ok || err != nil {
		return err
	}
	if err := hostmem.FutexWait(addr, v, d); err != nil && !errors.Is(err, hostmem.ErrTimeout) {
		return err
	}
	return nil
}

// Spin polls done until it reports true (true) or about d has passed
// (false), at the package's cadence (ClockEvery, YieldEvery). It polls at
// least ClockEvery times, and reads no clock before that. It is Until's
// spin phase, for a caller that then blocks on something Until cannot
// (a channel, a sync.Cond). With d <= 0 it polls once.
func Spin(d time.Duration, done func() bool) bool {
	if d <= 0 {
		return done()
	}
	ok, _ := spin(func() (bool, error) { return done(), nil }, d, 0, 0, 0)
	return ok
}

// Poll is Spin for a condition that can fail and costs enough per poll (a
// driver query through cgo) to read the clock after every one: it polls
// cond until it reports done (true), fails (its error) or d has passed
// since the first poll (false, nil).
func Poll(d time.Duration, cond func() (bool, error)) (bool, error) {
	return spin(cond, d, 0, 1, 0)
}

// spin is the spin phase: cond until done, an error, d passed (from the
// first clock read) or rounds polls; neither bound set: no poll.
func spin(cond func() (bool, error), d time.Duration, rounds, clockEvery, yieldEvery int) (bool, error) {
	return spinBatches(d, rounds, clockEvery, yieldEvery, func(n int) (bool, error) {
		for range n {
			if ok, err := cond(); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	})
}

// spinCounter is spin for Options.Target: the word polled inline, without
// a call per poll (see Options.Target).
func spinCounter(w *uint32, target uint32, d time.Duration, rounds, clockEvery, yieldEvery int) bool {
	ok, _ := spinBatches(d, rounds, clockEvery, yieldEvery, func(n int) (bool, error) {
		for range n {
			if Reached(atomic.LoadUint32(w), target) {
				return true, nil
			}
		}
		return false, nil
	})
	return ok
}

// spinBatches is the spin phase's cadence, for both forms: poll(n) polls
// the condition up to n times, in batches that end where the spin reads
// the clock (every clockEvery polls), yields (every yieldEvery) or runs
// out of rounds; neither d nor rounds set: no poll. Batches keep the
// bookkeeping (and, for spin, the call through poll) off the per-poll
// path.
func spinBatches(d time.Duration, rounds, clockEvery, yieldEvery int, poll func(n int) (bool, error)) (bool, error) {
	if d <= 0 && rounds <= 0 {
		return false, nil
	}
	if clockEvery <= 0 {
		clockEvery = ClockEvery
	}
	if yieldEvery <= 0 {
		yieldEvery = YieldEvery
	}
	var end time.Time
	clock, yield, left := clockEvery, yieldEvery, rounds
	for {
		n := min(clock, yield)
		if rounds > 0 {
			n = min(n, left)
		}
		if ok, err := poll(n); ok || err != nil {
			return ok, err
		}
		if rounds > 0 {
			if left -= n; left == 0 {
				return false, nil
			}
		}
		if yield -= n; yield == 0 {
			yield = yieldEvery
			runtime.Gosched()
		}
		if clock -= n; clock == 0 {
			clock = clockEvery
			if d > 0 {
				now := time.Now()
				if end.IsZero() {
					end = now.Add(d)
				} else if now.After(end) {
					return false, nil
				}
			}
		}
	}
}

// Reached reports whether counter v has reached target, wrap-aware: the
// counters only grow and compare modulo 2^32.
func Reached(v, target uint32) bool { return int32(v-target) >= 0 }
