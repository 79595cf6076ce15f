// Package members is the group plumbing every backend shares: the head
// each backend's group embeds (Head: who the members are, the group's
// store, fd exchange, timeout and namespace), the store
// namespace of a group (with a generation that never repeats within a
// process), the store all-gather through which members agree, the fd swap
// between local members, the table of registered
// segments, an in-band agreement over shared memory for members on one
// host (agree.go), and the call gate over the same pages, which numbers and
// approves a group's collectives (gate.go). Backends keep what differs
// (what a segment maps to, signal pads, paths, how a GPU waits).
package members

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/rendezvous"
)

// Prefix is the store namespace of generation gen of group name.
func Prefix(kind, job, name string, gen int) string {
	return fmt.Sprintf("symmem/%s/%s/%s#%d", job, kind, name, gen)
}

// Gather is a group's store all-gather: members call AllGather in the same
// order, each call under a fresh key of the group's namespace (the last
// rank to read deletes them), bounded by the group timeout. Each part
// carries a tag byte saying whether its rank is closing (Leave), so a
// teardown's exchange that meets a peer's ordinary call fails plainly
// on both ranks instead of reading the other call's bytes.
type Gather struct {
	what    string // "shm: group \"tp0\"" for errors
	store   *rendezvous.Client
	prefix  string
	ranks   []int
	me      int
	timeout time.Duration
	leaving atomic.Bool

	goneMu sync.RWMutex                    // held while gone runs, so that Unwatch waits for a running check only
	gone   func(q int, leaving bool) error // Watch

	mu  sync.Mutex
	seq int
}

// NewGather returns the all-gather of the group whose members are ranks (me
// is this rank's index) under prefix.
func NewGather(what string, store *rendezvous.Client, prefix string, ranks []int, me int, timeout time.Duration) *Gather {
	return &Gather{what: what, store: store, prefix: prefix, ranks: ranks, me: me, timeout: timeout}
}

// watchTick is how often an all-gather looks for peers that are gone:
// well within the second a user waits to hear that a peer left.
const watchTick = 10 * time.Millisecond

// Watch makes AllGather fail within watchTick once gone reports group rank
// q gone (its process exited, it is closing, its group failed: the error
// says which) and q has not posted its part: such a peer never will, and
// the store cannot see processes. Set it before the first AllGather.
func (a *Gather) Watch(gone func(q int, leaving bool) error) {
	a.goneMu.Lock()
	a.gone = gone
	a.goneMu.Unlock()
}

// Unwatch drops the watch: the group's Close calls it before it unmaps
// what gone reads. It waits for a check that is running, not for a running
// AllGather (which then goes on unwatched, bounded by its timeout).
func (a *Gather) Unwatch() {
	a.goneMu.Lock()
	a.gone = nil
	a.goneMu.Unlock()
}

// goneNow is gone's verdict on group rank q (nil once unwatched).
func (a *Gather) goneNow(q int, leaving bool) error {
	a.goneMu.RLock()
	defer a.goneMu.RUnlock()
	if a.gone == nil {
		return nil
	}
	return a.gone(q, leaving)
}

// Leave marks this rank's later all-gathers as its teardown's (World.Close):
// peers closing too take part; a peer in an ordinary call fails it with
// errs.PeerClosed.
func (a *Gather) Leave() { a.leaving.Store(true) }

// AllGather returns every member's bytes by group rank: the store's
// all-gather (rendezvous.Client.AllGatherWatched) with the watch beside
// its wait, and each part tagged with whether its rank is closing.
func (a *Gather) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	seq := a.seq
	a.seq++
	fail := func(err error) ([][]byte, error) {
		return nil, fmt.Errorf("%s all-gather #%d (timeout %v): %w", a.what, seq, a.timeout, err)
	}
	leaving := a.leaving.Load()
	tag := byte(0)
	if leaving {
		tag = 1
	}
	a.goneMu.RLock()
	watched := a.gone != nil && len(a.ranks) > 1
	a.goneMu.RUnlock()
	var watch func(context.Context, []string) error
	if watched {
		watch = func(ctx context.Context, keys []string) error { return a.watch(ctx, keys, leaving) }
	}
	vals, err := a.store.AllGatherWatched(ctx, fmt.Sprintf("%s/ag/%d", a.prefix, seq), a.ranks, a.me, append([]byte{tag}, mine...), watch)
	if err != nil {
		return fail(err)
	}
	for r, v := range vals {
		if len(v) == 0 {
			return fail(fmt.Errorf("rank %d sent an empty message (its symmem is another version?): %w", a.ranks[r], errs.Mismatch))
		}
		switch {
		case v[0] == tag:
		case leaving:
			return fail(fmt.Errorf("this rank is closing (World.Close), but rank %d is in another call of the group: the ranks did not make the same calls before Close: %w",
				a.ranks[r], errs.Mismatch))
		default:
			return fail(StateError(a.ranks[r], StateLeft))
		}
		vals[r] = v[1:]
	}
	return vals, nil
}

// watch checks the peers every watchTick until ctx ends (wait.Until: naps
// of watchTick that ctx ends), and returns why a peer that has not posted
// its part (keys, by group rank) never will (nil once ctx ends).
func (a *Gather) watch(ctx context.Context, keys []string, leaving bool) error {
	return wait.Until(context.Background(), func() (bool, error) { return ctx.Err() != nil, nil }, &wait.Options{
		Nap: watchTick, MaxNap: watchTick, Wake: ctx.Done(),
		Check: func(error, bool) error {
			for q := range a.ranks {
				if q == a.me {
					continue
				}
				err := a.goneNow(q, leaving)
				if err == nil {
					continue
				}
				// A part posted before its rank left is read as usual.
				if _, gerr := a.store.Get(ctx, keys[q]); errors.Is(gerr, rendezvous.ErrNotFound) {
					return err
				}
			}
			return nil
		},
	})
}

// Peer states: bits a rank sets (never clears) in a word of its shared
// page that its peers read in their waits (the CPU backend's signal pad,
// the HostAgreement's page).
const (
	// StateLeft: the rank is closing (World.Close) or closed the group: it
	// makes no more calls of the group, only the teardown's exchanges.
	StateLeft = 1
	// StateFailed: a call of the group failed midway on the rank: it makes
	// no more calls of the group.
	StateFailed = 2
)

// StateError is the error for a peer (global rank) whose state word holds
// state (nil when it holds neither bit).
func StateError(rank int, state uint64) error {
	switch {
	case state&StateFailed != 0:
		return fmt.Errorf("rank %d stopped using the group after a call failed there midway (see rank %d's error): %w", rank, rank, errs.Broken)
	case state&StateLeft != 0:
		return fmt.Errorf("rank %d closed the group (Group.Close or World.Close) while this rank waited for it: it made fewer calls of the group than this rank (it left early, or ended its loop sooner): %w",
			rank, errs.PeerClosed)
	}
	return nil
}

// Swap sends fd to every other member under tag and calls recv with each
// member's fd (indexed by group rank), bounded by the group timeout. The
// members posted to the group's store all-gather before (its setup), after
// Init had created their fd exchanges: a member that does not listen now
// closed its exchange (it gave up or exited), and the send to it fails at
// once saying so (FDExchange.Started) instead of at the timeout.
func Swap(ctx context.Context, fdx *rendezvous.FDExchange, prefix, tag string, ranks []int, me int, timeout time.Duration, fd int, recv func(r, fd int) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if fdx != nil { // nil for a group of one (nothing to swap)
		fdx.Started(ranks...)
	}
	return fdx.Swap(ctx, prefix+"/"+tag, ranks, me, fd, recv)
}
