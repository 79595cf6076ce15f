package members

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// CallLog compares a group's calls across hosts after they were issued,
// where no shared page reaches (the call gate compares the members on one
// host before; checked mode compares every call before, at a store round
// trip per call). Each rank folds every call (its record and path) into a
// running hash and, every tick in which it made calls, posts its count,
// hash and last calls to the store. Every tick (an idle rank backs off to
// logIdle ticks) it reads the posts of its two neighbours in the group's
// ring (if every pair of neighbours agrees, all agree) and compares each
// that is not ahead of it with its own log at that count (a neighbour
// ahead compares with this rank). The first difference goes to the store,
// so every rank learns it within a tick or so, and to onDiff on each.
// Detection is after the fact: a call that differs between hosts may
// already have produced wrong data or be waiting in NCCL; onDiff is where
// the group aborts its communicators and fails its later calls.
type CallLog struct {
	what   string
	store  *rendezvous.Client
	prefix string
	ranks  []int
	me     int
	tick   time.Duration
	onDiff func(error)

	mu    sync.Mutex
	n     uint64                 // calls logged
	hash  uint64                 // running hash of calls 1..n
	calls [logHistory]loggedCall // call k at calls[k%logHistory]
	sums  [logHistory]uint64     // the hash after call k at sums[k%logHistory]

	posted   uint64 // n at the last post
	diffOnce sync.Once
	quit     chan struct{}
	done     chan struct{}
}

type loggedCall struct {
	rec  agree.Record
	path uint8
}

const (
	// logPost is how many recent calls a post carries, so a difference
	// among them is named (argument and values); an older one is only
	// dated.
	logPost = 16
	// logHistory is how far back a rank can compare a neighbour's post: a
	// neighbour more than this many calls behind is compared once it is
	// closer.
	logHistory = 1024
	// LogTick is the default tick of NewCallLog (a difference is known on
	// every rank within about two).
	LogTick = 20 * time.Millisecond
)

// NewCallLog starts the log of the group whose members are ranks (me is
// this rank's index; keys under prefix). tick 0 is LogTick. Close stops it.
func NewCallLog(what string, store *rendezvous.Client, prefix string, ranks []int, me int, tick time.Duration, onDiff func(error)) *CallLog {
	if tick <= 0 {
		tick = LogTick
	}
	l := &CallLog{what: what, store: store, prefix: prefix + "/calllog/", ranks: ranks, me: me, tick: tick, onDiff: onDiff,
		quit: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// Add logs the next call of the group on this rank: its record and path
// code (agree.PathCode).
func (l *CallLog) Add(rec agree.Record, path uint8) {
	l.mu.Lock()
	l.n++
	// Each word mixed in whole (as agree.Digest does), the path last.
	h := agree.FoldRecord(l.hash, rec)
	h = (h ^ uint64(path)) * 0x9e3779b97f4a7c15
	l.hash = h ^ h>>31
	l.calls[l.n%logHistory] = loggedCall{rec, path}
	l.sums[l.n%logHistory] = l.hash
	l.mu.Unlock()
}

// Close stops the log and deletes this rank's post (a last post is not
// made: a rank closing has made its calls, the peers compare what they
// saw).
func (l *CallLog) Close() {
	select {
	case <-l.quit:
		return
	default:
		close(l.quit)
	}
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = l.store.Delete(ctx, l.key(l.me))
}

// logIdle bounds the backoff of an idle log: after rounds without new
// calls the wait doubles up to logIdle ticks (a rank waiting in NCCL makes
// no calls, but must still learn a difference found elsewhere: within a
// few hundred milliseconds).
const logIdle = 8

func (l *CallLog) run() {
	defer close(l.done)
	t := time.NewTimer(l.tick)
	defer t.Stop()
	wait := l.tick
	for {
		select {
		case <-l.quit:
			return
		case <-t.C:
		}
		before := l.posted
		if err := l.round(); err != nil {
			l.diffOnce.Do(func() { l.onDiff(err) })
			return
		}
		if l.posted != before {
			wait = l.tick
		} else {
			wait = min(2*wait, logIdle*l.tick)
		}
		t.Reset(wait)
	}
}

// post is a rank's store value: count, hash, then the last calls (oldest
// first), each its record's words and path.
func (l *CallLog) post() (uint64, []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := binary.LittleEndian.AppendUint64(nil, l.n)
	b = binary.LittleEndian.AppendUint64(b, l.hash)
	for k := l.n - min(l.n, logPost) + 1; k <= l.n && l.n > 0; k++ {
		c := l.calls[k%logHistory]
		for _, w := range c.rec {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
		b = append(b, c.path)
	}
	return l.n, b
}

const loggedBytes = agree.RecordBytes + 1

// round posts this rank's log if it made calls since the last post, then
// reads the group's difference key and the neighbours' posts. It returns
// the difference to report (errs.Mismatch); a store that does not answer
// (the job ending, a slow server) skips the round: the next one retries,
// and a member that is gone is the presences' to report.
func (l *CallLog) round() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*l.tick+time.Second)
	defer cancel()
	if n, b := l.post(); n != l.posted {
		if err := l.store.Set(ctx, l.key(l.me), b); err != nil {
			return nil
		}
		l.posted = n
	}
	if v, err := l.store.Get(ctx, l.prefix+"diff"); err == nil {
		return fmt.Errorf("%s: %s: %w", l.what, v, errs.Mismatch)
	} else if !errors.Is(err, rendezvous.ErrNotFound) {
		return nil
	}
	if len(l.ranks) < 2 {
		return nil
	}
	for _, q := range l.neighbours() {
		v, err := l.store.Get(ctx, l.key(q))
		if err != nil { // not posted yet, or no answer
			continue
		}
		what := l.compare(q, v)
		if what == "" {
			continue
		}
		// The peers learn it from the store; this rank reports it anyway.
		_ = l.store.Set(ctx, l.prefix+"diff", []byte(what))
		return fmt.Errorf("%s: %s: %w", l.what, what, errs.Mismatch)
	}
	return nil
}

// neighbours are the group ranks before and after this one in the ring
// (one rank for a group of two).
func (l *CallLog) neighbours() []int {
	n := len(l.ranks)
	next, prev := (l.me+1)%n, (l.me+n-1)%n
	if next == prev {
		return []int{next}
	}
	return []int{prev, next}
}

func (l *CallLog) key(q int) string { return fmt.Sprintf("%s%d", l.prefix, q) }

// compare names the first difference between neighbour q's post v and
// this rank's log at q's count ("" when they agree, or when they cannot be
// compared here: q is ahead, and compares itself, or more than logHistory
// calls behind).
func (l *CallLog) compare(q int, v []byte) string {
	if len(v) < 16 || (len(v)-16)%loggedBytes != 0 || len(v)-16 > logPost*loggedBytes {
		return fmt.Sprintf("rank %d posted a call log of %d bytes (another symmem version?)", l.ranks[q], len(v))
	}
	pn, ph := binary.LittleEndian.Uint64(v), binary.LittleEndian.Uint64(v[8:])
	l.mu.Lock()
	defer l.mu.Unlock()
	if pn == 0 || pn > l.n || l.n-pn >= logHistory || l.sums[pn%logHistory] == ph {
		return ""
	}
	// The calls differ at or before pn: name the first of q's posted calls
	// (pn-count+1..pn) that differs from this rank's.
	theirs := v[16:]
	count := uint64(len(theirs) / loggedBytes)
	before := pn - count // the difference is at or before it when no posted call is named
	for i := uint64(0); i < count; i++ {
		k := pn - count + 1 + i
		if l.n-k >= logHistory { // this rank's ring holds a later call in k's place now
			before = k
			continue
		}
		var tc agree.Call
		off := int(i) * loggedBytes
		for w := range tc.Record {
			tc.Record[w] = binary.LittleEndian.Uint64(theirs[off+8*w:])
		}
		tc.Path = agree.PathOf(theirs[off+agree.RecordBytes])
		c := l.calls[k%logHistory]
		mc := agree.Call{Record: c.rec, Path: agree.PathOf(c.path)}
		if tc == mc {
			continue
		}
		if what, ok := agree.Explain(l.ranks[l.me], mc, l.ranks[q], tc); ok {
			return fmt.Sprintf("call %d of the group (found after it was issued): %s", k, what)
		}
		return fmt.Sprintf("call %d of the group (found after it was issued): rank %d and rank %d made different calls", k, l.ranks[l.me], l.ranks[q])
	}
	return fmt.Sprintf("rank %d and rank %d made different calls at or before call %d of the group (found after they were issued; too far back to name)",
		l.ranks[l.me], l.ranks[q], before)
}
