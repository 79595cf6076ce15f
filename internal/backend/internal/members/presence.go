package members

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// Presences is this rank's view of which ranks of the job are gone, for
// groups whose members sit on several hosts, where pidfds and shared
// pages (HostAgreement) do not reach: every rank keeps a presence in the
// job's store (rendezvous.Client.Announce), and the store lists the ranks
// whose presence ended without leaving (their process exited or was
// killed). One goroutine follows that list. A group's store all-gather
// watches it (Gather.Watch with Gone), so a wait for a rank of another
// host that exited fails within the watch tick, naming it, instead of at
// the timeout.
type Presences struct {
	store *rendezvous.Client
	me    *rendezvous.Presence
	quit  chan struct{}
	done  chan struct{}

	mu   sync.RWMutex
	gone map[int]string // global rank -> its host, once its presence ended
	lost error          // the store itself went away
	subs map[*goneSub]struct{}
}

// goneSub is one OnGone registration (in subs until it runs or is
// cancelled: it runs at most once).
type goneSub struct {
	ranks map[int]bool
	f     func(error)
}

// The job's presence keys in the store.
const (
	presenceKey  = "symmem/presence/"
	presenceGone = "symmem/presence/gone"
)

// Announce opens this rank's presence (global rank, on host) and starts
// following the job's gone list. Close ends both.
func Announce(ctx context.Context, store *rendezvous.Client, rank int, host string) (*Presences, error) {
	me, err := store.Announce(ctx, presenceKey+strconv.Itoa(rank), presenceGone, []byte(strconv.Itoa(rank)+"|"+host))
	if err != nil {
		return nil, fmt.Errorf("announcing rank %d's presence: %w", rank, err)
	}
	p := &Presences{store: store, me: me, quit: make(chan struct{}), done: make(chan struct{}), gone: map[int]string{},
		subs: map[*goneSub]struct{}{}}
	go p.follow()
	return p, nil
}

// Gone is why global rank r will make no more calls (errs.PeerExited,
// naming it and its host), nil while its presence stands.
func (p *Presences) Gone(r int) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.goneLocked(r)
}

// goneLocked is Gone with p.mu held.
func (p *Presences) goneLocked(r int) error {
	if host, ok := p.gone[r]; ok {
		return fmt.Errorf("rank %d (host %s) exited: its connection to the job's store ended: %w", r, host, errs.PeerExited)
	}
	return p.lost
}

// OnGone calls f once, on a goroutine of its own, with Gone's error when
// the first of ranks (global) is gone or the store went away, also when
// that happened before; cancel stops it (f may still run if it was due).
// A group uses it to stop work that waits on its members' GPUs (NCCL),
// which no host-side watch reaches.
func (p *Presences) OnGone(ranks []int, f func(error)) (cancel func()) {
	s := &goneSub{ranks: map[int]bool{}, f: f}
	for _, r := range ranks {
		s.ranks[r] = true
	}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	p.notify()
	return func() {
		p.mu.Lock()
		delete(p.subs, s)
		p.mu.Unlock()
	}
}

// notify runs the subscriptions that are due, each once, and drops them
// (a later entry of the gone list finds nothing more to run for them).
func (p *Presences) notify() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		err := p.lost
		for r := range s.ranks {
			if _, ok := p.gone[r]; ok {
				err = p.goneLocked(r)
				break
			}
		}
		if err != nil {
			delete(p.subs, s)
			go s.f(err)
		}
	}
}

// presenceRetry is how long follow waits before it asks the store again
// after an error that is not the store's end.
const presenceRetry = 100 * time.Millisecond

// follow reads the gone list entry by entry until Close, or until the
// store is gone (then every rank counts as gone: nothing can be agreed
// any more).
func (p *Presences) follow() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.quit:
		case <-p.me.Lost():
			p.mu.Lock()
			if p.lost == nil {
				p.lost = fmt.Errorf("the job's store went away (the rank or launcher hosting it exited): %w", errs.PeerExited)
			}
			p.mu.Unlock()
			p.notify()
		}
		cancel()
	}()
	for n := 1; ; n++ {
		for {
			vals, err := p.store.Wait(ctx, rendezvous.GoneKey(presenceGone, n))
			if err == nil {
				p.record(vals[0])
				break
			}
			if ctx.Err() != nil {
				return
			}
			if !errors.Is(err, rendezvous.ErrTimeout) { // e.g. a refused connection while the store is going
				select {
				case <-ctx.Done():
					return
				case <-time.After(presenceRetry):
				}
			}
		}
	}
}

// record notes an entry of the gone list: "rank|host".
func (p *Presences) record(v []byte) {
	rank, host, _ := strings.Cut(string(v), "|")
	r, err := strconv.Atoi(rank)
	if err != nil {
		return // not an entry this package wrote
	}
	p.mu.Lock()
	p.gone[r] = host
	p.mu.Unlock()
	p.notify()
}

// Close leaves the job's presence cleanly (the store lists nothing) and
// stops following the list.
func (p *Presences) Close() error {
	select {
	case <-p.quit:
		return nil
	default:
	}
	close(p.quit)
	err := p.me.Leave()
	<-p.done
	return err
}
