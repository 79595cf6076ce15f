package members

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

// HostAgreement compares a pool.Record across the ranks of a group on one
// host through shared memory (pool.Agreer for backends without signal pads
// of their own on the host, like the GPU backend): every rank owns one page
// (a memfd all members map) with two record slots; Agree writes this rank's
// record and sequence number into slot seq%2 and reads every peer's. No
// store round trip: about a microsecond when the ranks arrive together.
// Two slots suffice: a rank cannot start agreement seq+1 before every peer
// posted seq, so it never overwrites a slot a peer is still reading.
type HostAgreement struct {
	what    string
	me      int
	ranks   []int
	timeout time.Duration
	pages   [][]byte   // by group rank; pages[me] is this rank's
	words   [][]uint64 // the pages as words
	mu      sync.Mutex // Agree: one at a time (the ranks must agree in the same order anyway)
	seq     uint64
}

// A slot: the sequence number (written last, atomically), then the record.
const (
	slotWords = 1 + len(pool.Record{})
	pageBytes = 4096
)

// NewHostAgreement creates this rank's page and maps every peer's, exchanged
// through fdx (collective over ranks).
func NewHostAgreement(ctx context.Context, what string, fdx *rendezvous.FDExchange, prefix string, ranks []int, me int, timeout time.Duration) (*HostAgreement, error) {
	a := &HostAgreement{what: what, me: me, ranks: ranks, timeout: timeout, pages: make([][]byte, len(ranks))}
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
	err = Swap(ctx, fdx, prefix, "agree", ranks, me, timeout, fd, func(r, fd int) error {
		p, err := mapFD(fd)
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

// slot is owner's slot for agreement seq.
func (a *HostAgreement) slot(owner int, seq uint64) []uint64 {
	return a.words[owner][slotWords*int(seq%2):][:slotWords]
}

// Agree compares mine with every rank's record for this agreement; a
// difference is a *pool.Disagreement (the lowest rank that differs from
// group rank 0), the same on every rank. A peer that does not arrive within
// the timeout (or before ctx ends) is an error naming it.
func (a *HostAgreement) Agree(ctx context.Context, mine pool.Record) error {
	if len(a.ranks) == 1 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	k := a.seq
	w := a.slot(a.me, k)
	copy(w[1:], mine[:])
	atomic.StoreUint64(&w[0], k) // publishes the record
	deadline := time.Now().Add(a.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for i := 1; i < len(a.ranks); i++ {
		q := (a.me + i) % len(a.ranks)
		if err := a.wait(ctx, q, k, deadline); err != nil {
			return err
		}
	}
	r0 := a.record(0, k)
	for q := 1; q < len(a.ranks); q++ {
		if r := a.record(q, k); r != r0 {
			return &pool.Disagreement{Rank: q, Theirs: r, Rank0: r0, Seq: k, Rank0Seq: k}
		}
	}
	return nil
}

func (a *HostAgreement) record(owner int, k uint64) pool.Record {
	var r pool.Record
	copy(r[:], a.slot(owner, k)[1:])
	return r
}

// agreeSpin is how long a wait polls before it sleeps: a sleep lasts tens
// of microseconds at least (timer slack), so a peer a little late would
// cost that much; 2000 polls first measured 0.9 us per scope end on the
// GPU host with one run in three at 31 us (results/gpu-single-2026-11-23/run22).
const agreeSpin = 200 * time.Microsecond

// wait polls peer q's slot until it holds agreement k: spinning first (the
// ranks usually arrive together), then sleeping in growing steps.
func (a *HostAgreement) wait(ctx context.Context, q int, k uint64, deadline time.Time) error {
	w := &a.slot(q, k)[0]
	nap := time.Microsecond
	var spinUntil time.Time
	for i := 0; ; i++ {
		if atomic.LoadUint64(w) == k {
			return nil
		}
		if i%64 != 63 {
			continue
		}
		now := time.Now()
		if spinUntil.IsZero() {
			spinUntil = now.Add(agreeSpin)
		}
		if now.Before(spinUntil) {
			runtime.Gosched()
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: waiting for rank %d to compare: %w", a.what, a.ranks[q], err)
		}
		if now.After(deadline) {
			return fmt.Errorf("%s: rank %d did not arrive at the comparison within %v (it is not making the same call, or it stopped): %w",
				a.what, a.ranks[q], a.timeout, rendezvous.ErrTimeout)
		}
		time.Sleep(nap)
		nap = min(2*nap, time.Millisecond)
	}
}

// Close unmaps the pages.
func (a *HostAgreement) Close() {
	for i, p := range a.pages {
		if p != nil {
			unix.Munmap(p)
			a.pages[i] = nil
		}
	}
}
