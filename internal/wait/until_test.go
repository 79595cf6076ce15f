package wait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/native/hostmem"
)

// slack bounds how late a wait may end on a loaded 2-core machine under
// -race: the tests check that waits end, and end for the right reason, not
// how fast.
const slack = 2 * time.Second

var errGone = errors.New("peer gone")

// word is a 32-bit futex word and its sleeper count in Go memory.
type word struct {
	mem []byte // [0:4] the word, [4:8] its sleepers
}

func newWord() *word { return &word{mem: make([]byte, 8)} }

func (w *word) addr() uint64     { return hostmem.Addr(w.mem) }
func (w *word) val() *uint32     { return hostmem.Uint32At(w.addr()) }
func (w *word) sleepers() uint32 { return atomic.LoadUint32(hostmem.Uint32At(w.addr() + 4)) }

// set stores v and wakes the sleepers, as a signalling peer does.
func (w *word) set(v uint32) {
	atomic.StoreUint32(w.val(), v)
	if w.sleepers() != 0 {
		hostmem.FutexWake(w.addr(), 0)
	}
}

func TestUntil(t *testing.T) {
	type env struct {
		flag   atomic.Bool
		w      *word
		wake   chan struct{}
		calls  atomic.Int64 // cond calls
		checks []string     // what Check saw, in order
	}
	cases := []struct {
		name  string
		ctx   func() (context.Context, context.CancelFunc)
		opts  func(e *env) Options
		cond  func(e *env) (bool, error) // nil: e.flag, or e.w's value != 0 with a word
		after func(e *env)               // run on another goroutine once the wait began
		want  error                      // errors.Is; nil: success
		min   time.Duration              // the wait lasts at least this long
		max   time.Duration              // and at most this long (plus slack)
		check func(t *testing.T, e *env)
	}{
		{name: "met at once, no spin", opts: func(*env) Options { return Options{} },
			after: nil, cond: func(*env) (bool, error) { return true, nil }},
		{name: "met during the spin", opts: func(*env) Options { return Options{Spin: time.Second, Timeout: time.Millisecond} },
			after: func(e *env) { time.Sleep(5 * time.Millisecond); e.flag.Store(true) }, max: 100 * time.Millisecond},
		{name: "met while napping", opts: func(*env) Options { return Options{Nap: time.Millisecond, MaxNap: 2 * time.Millisecond} },
			after: func(e *env) { time.Sleep(20 * time.Millisecond); e.flag.Store(true) }, min: 20 * time.Millisecond, max: 100 * time.Millisecond},
		{name: "timeout", opts: func(*env) Options { return Options{Spin: time.Millisecond, Timeout: 50 * time.Millisecond} },
			want: context.DeadlineExceeded, min: 50 * time.Millisecond, max: 50 * time.Millisecond},
		{name: "timeout in the caller's words", opts: func(e *env) Options {
			return Options{Timeout: 30 * time.Millisecond, Check: func(ctxErr error, expired bool) error {
				if expired {
					return errGone
				}
				return nil
			}}
		}, want: errGone, min: 30 * time.Millisecond, max: 30 * time.Millisecond},
		{name: "fixed deadline", opts: func(*env) Options {
			d := time.Now().Add(40 * time.Millisecond)
			return Options{Deadline: &d, Timeout: time.Hour}
		}, want: context.DeadlineExceeded, min: 30 * time.Millisecond, max: 40 * time.Millisecond},
		{name: "ctx cancelled ends a long nap", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { time.Sleep(30 * time.Millisecond); cancel() }()
			return ctx, cancel
		}, opts: func(*env) Options { return Options{Nap: 10 * time.Second, Timeout: time.Hour} },
			want: context.Canceled, min: 30 * time.Millisecond, max: 30 * time.Millisecond},
		{name: "ctx deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 30*time.Millisecond)
		}, opts: func(*env) Options { return Options{Nap: 10 * time.Second, Timeout: time.Hour} },
			want: context.DeadlineExceeded, min: 30 * time.Millisecond, max: 30 * time.Millisecond},
		{name: "cond's error ends the spin", opts: func(*env) Options { return Options{Spin: time.Hour, Timeout: time.Hour} },
			cond: func(e *env) (bool, error) {
				if e.calls.Add(1) == 100 {
					return false, errGone
				}
				return false, nil
			}, want: errGone, max: 0},
		{name: "check's error ends the wait", opts: func(e *env) Options {
			return Options{Timeout: time.Hour, Check: func(ctxErr error, expired bool) error {
				if e.calls.Load() >= 5 {
					return errGone
				}
				return nil
			}}
		}, cond: func(e *env) (bool, error) { e.calls.Add(1); return false, nil }, want: errGone, max: 100 * time.Millisecond},
		{name: "met, then gone: no failure", opts: func(e *env) Options {
			return Options{Timeout: time.Hour, Check: func(error, bool) error {
				if e.calls.Load() >= 3 {
					e.flag.Store(true) // the peer posted, then left
					return errGone
				}
				return nil
			}}
		}, cond: func(e *env) (bool, error) { e.calls.Add(1); return e.flag.Load(), nil }, max: 100 * time.Millisecond},
		{name: "check sees ctx and the deadline", ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}, opts: func(e *env) Options {
			return Options{Timeout: 20 * time.Millisecond, Nap: 5 * time.Millisecond, Check: func(ctxErr error, expired bool) error {
				switch {
				case ctxErr != nil:
					e.checks = append(e.checks, "ctx")
				case expired:
					e.checks = append(e.checks, "expired")
				default:
					e.checks = append(e.checks, "ok")
				}
				return nil
			}}
		}, want: context.DeadlineExceeded, min: 20 * time.Millisecond, max: 20 * time.Millisecond,
			check: func(t *testing.T, e *env) {
				if len(e.checks) < 2 || e.checks[0] != "ok" || e.checks[len(e.checks)-1] != "expired" {
					t.Errorf("Check saw %v, want ok... then expired", e.checks)
				}
			}},
		{name: "rounds bound the spin", opts: func(*env) Options {
			return Options{Rounds: 50, YieldEvery: 1, Timeout: time.Millisecond}
		}, cond: func(e *env) (bool, error) { e.calls.Add(1); return false, nil }, want: context.DeadlineExceeded, max: 50 * time.Millisecond,
			check: func(t *testing.T, e *env) {
				if n := e.calls.Load(); n < 50 {
					t.Errorf("cond polled %d times, want at least the 50 rounds", n)
				}
			}},
		{name: "futex sleep woken by the signal", opts: func(e *env) Options {
			return Options{Spin: 100 * time.Microsecond, Futex: e.w.addr(), Sleepers: e.w.addr() + 4, Slice: 10 * time.Second, Timeout: time.Hour}
		}, after: func(e *env) {
			for e.w.sleepers() == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
			e.w.set(1)
		}, max: 100 * time.Millisecond,
			check: func(t *testing.T, e *env) {
				if n := e.w.sleepers(); n != 0 {
					t.Errorf("%d sleepers left counted", n)
				}
			}},
		{name: "futex sleep bounded by the deadline", opts: func(e *env) Options {
			return Options{Futex: e.w.addr(), Slice: 10 * time.Second, Timeout: 30 * time.Millisecond}
		}, want: context.DeadlineExceeded, min: 30 * time.Millisecond, max: 30 * time.Millisecond},
		{name: "futex slices let Check look", opts: func(e *env) Options {
			return Options{Futex: e.w.addr(), Slice: 5 * time.Millisecond, Timeout: time.Hour, Check: func(error, bool) error {
				if e.flag.Load() {
					return errGone // a peer died without waking this sleeper
				}
				return nil
			}}
		}, cond: func(e *env) (bool, error) { return atomic.LoadUint32(e.w.val()) != 0, nil },
			after: func(e *env) { time.Sleep(20 * time.Millisecond); e.flag.Store(true) }, want: errGone, min: 20 * time.Millisecond, max: 30 * time.Millisecond},
		{name: "wake ends a long nap", opts: func(e *env) Options {
			return Options{Nap: 10 * time.Second, Wake: e.wake, Timeout: time.Hour}
		}, after: func(e *env) { time.Sleep(20 * time.Millisecond); e.flag.Store(true); close(e.wake) }, min: 20 * time.Millisecond, max: 50 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := &env{w: newWord(), wake: make(chan struct{})}
			// Before the context's deadline and the signaller start their
			// clocks: a wait bounded by either cannot then look shorter.
			start := time.Now()
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			cond := func() (bool, error) {
				if c.cond != nil {
					return c.cond(e)
				}
				return e.flag.Load() || atomic.LoadUint32(e.w.val()) != 0, nil
			}
			if c.after != nil {
				go c.after(e)
			}
			o := c.opts(e)
			err := Until(ctx, cond, &o)
			took := time.Since(start)
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("err %v, want nil", err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if took < c.min || took > c.max+slack {
				t.Errorf("took %v, want %v to %v (+%v slack)", took, c.min, c.max, slack)
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
}

// TestUntilTarget: with no cond, the wait is for the futex word to reach
// Options.Target (wrap-aware), spinning on the word and then sleeping on it.
func TestUntilTarget(t *testing.T) {
	cases := []struct {
		name       string
		start, set uint32 // the word's value at first, and what the signaller stores
		target     uint32
		spin       time.Duration
		want       error
		minT, maxT time.Duration
	}{
		{name: "reached already", start: 7, target: 7, spin: time.Millisecond},
		{name: "reached during the spin", start: 0, set: 1, target: 1, spin: time.Second, maxT: 100 * time.Millisecond},
		{name: "reached while asleep", start: 0, set: 1, target: 1, minT: 20 * time.Millisecond, maxT: 100 * time.Millisecond},
		{name: "wraps around", start: ^uint32(0) - 1, set: 2, target: 1, minT: 20 * time.Millisecond, maxT: 100 * time.Millisecond}, // start is behind target: waits for the set
		{name: "behind: times out", start: 5, set: 0, target: 6, want: context.DeadlineExceeded, minT: 50 * time.Millisecond, maxT: 50 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWord()
			atomic.StoreUint32(w.val(), c.start)
			// start before the signaller's sleep: it may begin before
			// this goroutine reads the clock (took 19.3 ms of 20 once).
			start := time.Now()
			if c.set != 0 {
				go func() { time.Sleep(20 * time.Millisecond); w.set(c.set) }()
			}
			timeout := 50 * time.Millisecond
			if c.want == nil {
				timeout = 5 * time.Second // a stall past 30 ms must not turn a success into a timeout
			}
			err := Until(context.Background(), nil, &Options{Spin: c.spin, Futex: w.addr(), Target: c.target, Sleepers: w.addr() + 4, Timeout: timeout})
			took := time.Since(start)
			if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if took < c.minT || took > c.maxT+slack {
				t.Errorf("took %v, want %v to %v (+%v slack)", took, c.minT, c.maxT, slack)
			}
		})
	}
	if err := Until(context.Background(), nil, &Options{}); err == nil {
		t.Error("no cond and no word: nil error")
	}
}

// TestUntilSharedDeadline: waits that share a Deadline share one bound,
// set by the first that sleeps.
func TestUntilSharedDeadline(t *testing.T) {
	var deadline time.Time
	never := func() (bool, error) { return false, nil }
	start := time.Now()
	o := Options{Timeout: 60 * time.Millisecond, Deadline: &deadline, Nap: time.Millisecond, Check: func(_ error, expired bool) error {
		if time.Since(start) > 30*time.Millisecond {
			return errGone // end the first wait early
		}
		return nil
	}}
	if err := Until(context.Background(), never, &o); !errors.Is(err, errGone) {
		t.Fatalf("first wait: %v", err)
	}
	if deadline.IsZero() || deadline.Sub(start) > 60*time.Millisecond+slack {
		t.Fatalf("deadline %v after the start, want about 60ms", deadline.Sub(start))
	}
	set := deadline
	o.Check = nil
	if err := Until(context.Background(), never, &o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second wait: %v", err)
	}
	if deadline != set {
		t.Errorf("the second wait moved the shared deadline by %v", deadline.Sub(set))
	}
	if took := time.Since(start); took < 60*time.Millisecond || took > 60*time.Millisecond+slack {
		t.Errorf("both waits took %v, want the one bound of 60ms", took)
	}
}

func TestSpin(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		met  time.Duration // the condition turns true after this (0: never)
		want bool
		min  time.Duration
	}{
		{name: "met at once", d: time.Second, met: -1, want: true},
		{name: "met within the spin", d: time.Second, met: 5 * time.Millisecond, want: true, min: 5 * time.Millisecond},
		{name: "spin runs out", d: 20 * time.Millisecond, want: false, min: 20 * time.Millisecond},
		{name: "no spin: one look", d: 0, want: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var flag atomic.Bool
			start := time.Now() // before the setter starts its clock
			switch {
			case c.met < 0:
				flag.Store(true)
			case c.met > 0:
				go func() { time.Sleep(c.met); flag.Store(true) }()
			}
			polls := 0
			got := Spin(c.d, func() bool { polls++; return flag.Load() })
			took := time.Since(start)
			if got != c.want {
				t.Fatalf("Spin = %v, want %v", got, c.want)
			}
			if took < c.min || took > max(c.d, c.met)+slack {
				t.Errorf("took %v, want %v to %v (+%v slack)", took, c.min, max(c.d, c.met), slack)
			}
			if c.d <= 0 && polls != 1 {
				t.Errorf("%d polls without a spin, want 1", polls)
			}
		})
	}
}

// TestPoll: done, a failure and the spin running out, the clock read from
// the first poll.
func TestPoll(t *testing.T) {
	bad := errors.New("bad")
	polls := 0
	if ok, err := Poll(time.Second, func() (bool, error) { polls++; return polls == 3, nil }); !ok || err != nil || polls != 3 {
		t.Errorf("Poll met at the third poll = %v, %v after %d polls", ok, err, polls)
	}
	if ok, err := Poll(time.Second, func() (bool, error) { return false, bad }); ok || err != bad {
		t.Errorf("Poll of a failing condition = %v, %v", ok, err)
	}
	start := time.Now()
	ok, err := Poll(10*time.Millisecond, func() (bool, error) { return false, nil })
	if took := time.Since(start); ok || err != nil || took < 10*time.Millisecond || took > 10*time.Millisecond+slack {
		t.Errorf("Poll never met = %v, %v after %v, want false after 10ms", ok, err, took)
	}
}

// TestUntilAllocs: a wait met during the spin allocates nothing (the CPU
// backend waits once per signal).
func TestUntilAllocs(t *testing.T) {
	w := newWord()
	atomic.StoreUint32(w.val(), 1)
	n := 0
	cond := func() (bool, error) { n++; return n%3 == 0, nil }
	allocs := testing.AllocsPerRun(100, func() {
		if err := Until(context.Background(), cond, &Options{Spin: time.Millisecond, Futex: w.addr(), Sleepers: w.addr() + 4, Timeout: time.Second}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per wait, want 0", allocs)
	}
	// The CPU backend's form: no cond, the word reaching Target, met in
	// the sleep phase (Check, which runs before the first sleep, sets it).
	var target uint32 = 1
	allocs = testing.AllocsPerRun(100, func() {
		target++
		err := Until(context.Background(), nil, &Options{Futex: w.addr(), Sleepers: w.addr() + 4, Target: target, Timeout: time.Second,
			Check: func(error, bool) error { atomic.StoreUint32(w.val(), target); return nil }})
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per wait on a Target, want 0", allocs)
	}
}
