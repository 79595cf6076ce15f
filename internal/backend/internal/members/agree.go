package members

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/rendezvous"
)

// HostAgreement compares a agree.Record across the ranks of a group on one
// host through shared memory (agree.Agreer for backends without signal pads
// of their own on the host, like the GPU backend): every rank owns one page
// (a memfd all members map) with two record slots, a cache line each; Agree
// writes this rank's record and sequence number into slot seq%2 and reads
// every peer's. No store round trip: about a microsecond when the ranks
// arrive together. Two slots suffice: a rank cannot start agreement seq+1
// before every peer posted seq, so it never overwrites a slot a peer is
// still reading. A peer whose process exits is reported within about a
// millisecond of the wait's first sleep, through a pidfd it sent with its
// page.
type HostAgreement struct {
	what    string
	me      int
	ranks   []int
	timeout time.Duration
	pages   [][]byte   // by group rank; pages[me] is this rank's
	words   [][]uint64 // the pages as words
	pidfds  []int      // peers' pidfds by group rank (-1: me, or none sent)
	mu      sync.Mutex // Agree: one at a time (the ranks must agree in the same order anyway)
	seq     uint64
	failed  error     // a wait that failed: the ranks' sequence numbers no longer line up
	gate    *CallGate // the call gate over the same pages (gate.go), made by Gate
}

// A slot is one cache line: the sequence number (written last,
// atomically), then the record; a slot that straddled two lines cost a
// second line transfer per peer.
const (
	slotWords = 8
	recWords  = len(agree.Record{})
	pageBytes = gateRingOff + 8*entryWords*gateRing // the slots, the gate's words and ring (gate.go)
)

var _ [slotWords - 1 - recWords]struct{} // the record fits the line

// NewHostAgreement creates this rank's page and maps every peer's, exchanged
// through fdx with a pidfd of each rank's process (collective over ranks).
func NewHostAgreement(ctx context.Context, what string, fdx *rendezvous.FDExchange, prefix string, ranks []int, me int, timeout time.Duration) (*HostAgreement, error) {
	a := &HostAgreement{what: what, me: me, ranks: ranks, timeout: timeout, pages: make([][]byte, len(ranks)), pidfds: make([]int, len(ranks))}
	for r := range a.pidfds {
		a.pidfds[r] = -1
	}
	fd, err := unix.MemfdCreate("symmem-agree", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%s: agreement page: memfd_create: %w", what, err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, pageBytes); err != nil {
		return nil, fmt.Errorf("%s: agreement page: ftruncate: %w", what, err)
	}
	mapFD := func(fd int) ([]byte, error) {
		return unix.Mmap(fd, 0, pageBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if a.pages[me], err = mapFD(fd); err != nil {
		return nil, fmt.Errorf("%s: agreement page: mmap: %w", what, err)
	}
	send := []int{fd}
	// Without pidfds (kernels before 5.3) a peer that exits is found at
	// the timeout.
	if pfd, err := unix.PidfdOpen(os.Getpid(), 0); err == nil {
		defer unix.Close(pfd)
		send = append(send, pfd)
	}
	err = swapFDs(ctx, fdx, prefix+"/agree", ranks, me, timeout, send, func(r int, fds []int) error {
		if len(fds) > 1 {
			a.pidfds[r] = fds[1]
		}
		p, err := mapFD(fds[0])
		a.pages[r] = p
		return err
	})
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("%s: agreement pages: %w", what, err)
	}
	a.words = make([][]uint64, len(ranks))
	for r, p := range a.pages {
		w, ok := hostmem.View[uint64](p)
		if !ok {
			a.Close()
			return nil, fmt.Errorf("%s: agreement page of rank %d is not 8-byte aligned", what, ranks[r])
		}
		a.words[r] = w
	}
	return a, nil
}

// swapFDs sends fds to every other member under key and calls take with
// each member's descriptors (by group rank), bounded by timeout. The first
// (the page) is closed after take returns; take owns the others.
func swapFDs(ctx context.Context, fdx *rendezvous.FDExchange, key string, ranks []int, me int, timeout time.Duration, fds []int, take func(r int, fds []int) error) (err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if err != nil {
			fdx.Discard(key, ranks) // what the others sent would stay open until the exchange closes
		}
	}()
	for r, gr := range ranks {
		if r != me {
			if err := fdx.Send(ctx, gr, key, fds); err != nil {
				return fmt.Errorf("sending to rank %d: %w", gr, err)
			}
		}
	}
	for r, gr := range ranks {
		if r == me {
			continue
		}
		got, err := fdx.Recv(ctx, gr, key)
		if err != nil {
			return fmt.Errorf("receiving from rank %d: %w", gr, err)
		}
		if len(got) < 1 || len(got) > 2 {
			for _, f := range got {
				unix.Close(f)
			}
			return fmt.Errorf("rank %d sent %d descriptors, want its page and a pidfd", gr, len(got))
		}
		err = take(r, got)
		unix.Close(got[0])
		if err != nil {
			return fmt.Errorf("rank %d's page: %w", gr, err)
		}
	}
	return nil
}

// slot is owner's slot for agreement seq.
func (a *HostAgreement) slot(owner int, seq uint64) []uint64 {
	return a.words[owner][slotWords*int(seq&1):][:1+recWords]
}

// Agree compares mine with every rank's record for this agreement; a
// difference is a *agree.Disagreement (the lowest rank that differs from
// group rank 0), the same on every rank. A peer that does not arrive within
// the timeout (or before ctx ends) is an error naming it, and so, at once,
// is one whose process exited (errs.PeerExited). When the peers are there
// it reads no clock and allocates nothing.
func (a *HostAgreement) Agree(ctx context.Context, mine agree.Record) error {
	n := len(a.ranks)
	if n == 1 {
		return nil
	}
	a.mu.Lock()
	if a.failed != nil {
		a.mu.Unlock()
		return fmt.Errorf("%s: an earlier comparison of the ranks' calls failed (%v), so this group cannot be used any more: close it (or the World) and create it again: %w", a.what, a.failed, errs.Broken)
	}
	a.seq++
	k := a.seq
	w := a.slot(a.me, k)
	copy(w[1:], mine[:])
	atomic.StoreUint64(&w[0], k) // publishes the record
	var deadline time.Time       // set by the first wait that sleeps
	same := true
	for i := 1; i < n; i++ {
		q := a.me + i
		if q >= n {
			q -= n
		}
		s := a.slot(q, k)
		if atomic.LoadUint64(&s[0]) != k {
			if err := a.wait(ctx, q, k, &deadline); err != nil {
				// The ranks' agreement numbers no longer line up.
				a.failed = err
				a.SetState(StateFailed)
				a.mu.Unlock()
				return err
			}
		}
		same = same && agree.Record(s[1:]) == mine
	}
	var err error
	if !same {
		err = a.disagreement(k)
	}
	a.mu.Unlock()
	return err
}

// disagreement is agreement k's difference, as every rank sees it.
func (a *HostAgreement) disagreement(k uint64) error {
	r0 := agree.Record(a.slot(0, k)[1:])
	for q := 1; q < len(a.ranks); q++ {
		if r := agree.Record(a.slot(q, k)[1:]); r != r0 {
			all := agree.AllKind(len(a.ranks), func(o int) (agree.Record, uint64) { return agree.Record(a.slot(o, k)[1:]), k })
			return &agree.Disagreement{Rank: q, Theirs: r, Rank0: r0, Seq: k, Rank0Seq: k, AllKind: all}
		}
	}
	return nil
}

// agreeSpin is how long a wait polls before it sleeps: a sleep lasts tens
// of microseconds at least (timer slack), so a peer a little late would
// cost that much. It is a time, not a count of polls: a count runs out too
// soon on a busy host, where polls are fast.
const agreeSpin = 200 * time.Microsecond

// wait polls peer q's slot until it holds agreement k (wait.Until):
// spinning first (the ranks usually arrive together), then sleeping in
// growing naps (wait.Nap to wait.MaxNap), checking between naps that q's
// process lives. While it spins it yields to this process's other
// goroutines every 256 polls and reads the clock every 1024: each costs
// tens of nanoseconds, and done more often they delay seeing the peer's
// post by that much.
// deadline is set at the first sleep (the timeout from then), shared by the
// waits of one agreement.
func (a *HostAgreement) wait(ctx context.Context, q int, k uint64, deadline *time.Time) error {
	w := &a.slot(q, k)[0]
	return wait.Until(ctx, func() (bool, error) { return atomic.LoadUint64(w) == k, nil }, &wait.Options{
		Spin: agreeSpin, YieldEvery: 256, ClockEvery: 1024,
		Timeout: a.timeout, Deadline: deadline,
		Check: func(ctxErr error, expired bool) error {
			if ctxErr != nil {
				return fmt.Errorf("%s: waiting for rank %d to compare: %w", a.what, a.ranks[q], ctxErr)
			}
			if err := a.Gone(q, false); err != nil {
				return fmt.Errorf("%s: before the comparison: %w", a.what, err) // unless it posted, then left: not a failure (Until looks once more)
			}
			if expired {
				return fmt.Errorf("%s: rank %d did not arrive at the comparison within %v (it is not making the same call, or it stopped): %w",
					a.what, a.ranks[q], a.timeout, rendezvous.ErrTimeout)
			}
			return nil
		},
	})
}

// Exited returns the lowest group rank whose process has exited, -1 if
// none (or none can be told: no pidfds).
func (a *HostAgreement) Exited() int {
	for q := range a.ranks {
		if q != a.me && PidfdExited(a.pidfds[q]) {
			return q
		}
	}
	return -1
}

// wState is the word of each rank's page that holds its state
// (StateLeft, StateFailed), read by its peers.
const wState = 17

// SetState sets bits in this rank's state word and wakes the gate's
// watchers, so that peers waiting for this rank learn of it at once.
func (a *HostAgreement) SetState(bits uint64) {
	atomic.OrUint64(&a.words[a.me][wState], bits)
	if a.gate != nil {
		a.gate.Wake()
	}
}

// Gone returns why group rank q will make no more calls of the group: its
// process exited (errs.PeerExited), it is closing (errs.PeerClosed; not
// counted when leaving: this rank is closing too) or a call failed on it
// (errs.Broken). Nil while q takes part.
func (a *HostAgreement) Gone(q int, leaving bool) error {
	return Gone(a.ranks, a.me, q, leaving, a.exited, func(p int) uint64 { return atomic.LoadUint64(&a.words[p][wState]) })
}

// Gone is both backends' verdict on group rank q of a group of ranks
// (this rank: me): why it will make no more calls of the group, nil while
// it takes part. exited(p) says whether p's process exited (nil: it
// lives), state(p) is p's state word (StateLeft, StateFailed). A rank
// that failed most likely failed for one that exited or left: that one is
// named instead. When leaving, StateLeft is not counted: this rank is
// closing too.
func Gone(ranks []int, me, q int, leaving bool, exited func(p int) error, state func(p int) uint64) error {
	if err := exited(q); err != nil {
		return err
	}
	st := state(q)
	if leaving {
		st &^= StateLeft
	}
	if st&StateFailed != 0 {
		for p := range ranks {
			if p == me || p == q {
				continue
			}
			if err := exited(p); err != nil {
				return err
			}
			if !leaving && state(p)&StateLeft != 0 {
				return StateError(ranks[p], StateLeft)
			}
		}
	}
	return StateError(ranks[q], st)
}

// PidfdExited reports whether the process of pidfd fd has exited (the fd
// is readable); fd < 0: no process to watch.
func PidfdExited(fd int) bool {
	if fd < 0 {
		return false
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0 && pfd[0].Revents&unix.POLLIN != 0
}

// exited is group rank q's exit, as Gone wants it.
func (a *HostAgreement) exited(q int) error {
	if PidfdExited(a.pidfds[q]) {
		return fmt.Errorf("rank %d exited: %w", a.ranks[q], errs.PeerExited)
	}
	return nil
}

// Close unmaps the pages and closes the pidfds.
func (a *HostAgreement) Close() {
	for i, p := range a.pages {
		if p != nil {
			unix.Munmap(p)
			a.pages[i] = nil
		}
	}
	for i, fd := range a.pidfds {
		if fd >= 0 {
			unix.Close(fd)
			a.pidfds[i] = -1
		}
	}
}
