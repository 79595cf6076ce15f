package members

import (
	"cmp"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/rendezvous"
)

// CallGate numbers the collectives of a group whose ranks share a host and
// approves each once every rank made it alike, through the HostAgreement's
// pages: no store round trip, no host waiting for its peers. A rank
// publishes each call's entry (its argument record and path) in a ring in
// its own page and goes on; whichever rank finds every peer's entry for
// the next unapproved call compares them and advances the approval word,
// which lives in rank 0's page where a GPU stream can wait for it (the GPU
// backend registers that page with the device and makes copy-engine and
// NCCL calls wait for their number before they move data). Calls are
// approved in order, so a GPU waiting for call k waits for every earlier
// one too.
//
// A difference on a call that some rank gates is recorded once (the failed
// word) and wakes every rank's watcher (a futex on the shared page): the
// approval stops there, so no rank's gated call runs, and each backend
// stops what its GPU queued. A difference between calls that no rank gates
// (symmem's kernels on every rank) is left to the kernels' in-band check,
// which reports it without losing the context.
//
// Publishing costs a rank one cache line of stores and two loads; it
// compares (n cache lines) only when a peer waits for an approval or the
// ring would otherwise overwrite an entry not yet compared.
type CallGate struct {
	a    *HostAgreement
	pub  uint64 // calls this rank published
	seen uint32 // the wake count Sleep last saw
	// The words Publish touches, resolved once.
	myPub, approved, failed, want *uint64
	ring                          [][]uint64 // each rank's ring
}

// A gate entry is one cache line: the call number (written first, read
// last), the record, the path word (the caller's path code, gatedBit when
// the rank waits for approval).
const (
	gateRing    = 256  // entries per rank: how far a rank may run ahead of the slowest
	gateRingOff = 4096 // byte offset of the ring in each page
	entryWords  = 8
	gatedBit    = 1 << 63

	// Words of each rank's page (after the agreement's two slots).
	wPub = 16 // calls this rank published (written after the entry); 17 is wState (agree.go)
	// Words of rank 0's page, shared by the group.
	wApproved = 24 // the last call approved; the GPU reads its low 32 bits
	wFailed   = 32 // the first call that differed (0: none)
	wWant     = 40 // the highest call some rank's GPU waits for
	wWake     = 48 // futex word, bumped when failed is set

	// ApprovedOffset and FailedOffset are the approval and failed words'
	// byte offsets in rank 0's page.
	ApprovedOffset = 8 * wApproved
	FailedOffset   = 8 * wFailed

	abandonedBit = 1 << 62 // in the failed word: a rank left (Abandon), no difference
)

var _ [gateRingOff - 8*(wWake+1)]struct{} // the shared words fit before the ring

// Gate returns the agreement's call gate (one per agreement; its Publish
// calls must be ordered, like the group's collectives).
func (a *HostAgreement) Gate() *CallGate {
	if a.gate == nil {
		c := &CallGate{a: a, ring: make([][]uint64, len(a.ranks))}
		c.myPub = c.word(a.me, wPub)
		c.approved, c.failed, c.want = c.word(0, wApproved), c.word(0, wFailed), c.word(0, wWant)
		for q := range c.ring {
			c.ring[q] = a.words[q][gateRingOff/8:][:entryWords*gateRing]
		}
		a.gate = c
	}
	return a.gate
}

// SharedPage is rank 0's page, where the approval word lives
// (ApprovedOffset), for registration with a device.
func (c *CallGate) SharedPage() []byte { return c.a.pages[0] }

// GateEntry is one rank's entry for a call.
type GateEntry struct {
	Record agree.Record
	Path   uint8 // the gate code of the path that runs the call (agree.PathCode)
	Gated  bool  // the rank's GPU waits for the call's approval
}

func (e GateEntry) word() uint64 {
	w := uint64(e.Path)
	if e.Gated {
		w |= gatedBit
	}
	return w
}

func entryOf(w []uint64) GateEntry {
	return GateEntry{Record: agree.Record(w[1:7]), Path: uint8(w[7]), Gated: w[7]&gatedBit != 0}
}

// GateMismatch is the first call on which the ranks differ: group rank
// Rank's entry against rank 0's (the lowest rank that differs; the same on
// every rank).
type GateMismatch struct {
	Call          uint64
	Rank          int
	Theirs, Rank0 GateEntry
	// Abandoned: no difference, a rank gave up on the call (Abandon);
	// Missing is the lowest rank that had not made it then.
	Abandoned bool
	Missing   int
}

func (m *GateMismatch) Error() string {
	if m.Abandoned {
		return fmt.Sprintf("call %d abandoned: group rank %d did not make it", m.Call, m.Missing)
	}
	return fmt.Sprintf("call %d: group rank %d made it with record %x path %d, rank 0 with %x path %d",
		m.Call, m.Rank, m.Theirs.Record, m.Theirs.Path, m.Rank0.Record, m.Rank0.Path)
}

func (m *GateMismatch) Unwrap() error { return errs.Mismatch }

func (c *CallGate) word(owner, i int) *uint64 { return &c.a.words[owner][i] }

func (c *CallGate) entry(owner int, k uint64) []uint64 {
	return c.ring[owner][entryWords*int(k%gateRing):][:entryWords]
}

// Published is how many calls this rank published.
func (c *CallGate) Published() uint64 { return c.pub }

// Approved is the last call approved.
func (c *CallGate) Approved() uint64 { return atomic.LoadUint64(c.approved) }

// Failed returns the first difference found, nil if none (the usual answer
// costs one load).
func (c *CallGate) Failed() *GateMismatch {
	f := atomic.LoadUint64(c.failed)
	if f == 0 {
		return nil
	}
	return c.mismatch(f)
}

// mismatch reads call f's difference from the ring (its entries stay: no
// rank publishes past a failure, and none was approved).
func (c *CallGate) mismatch(f uint64) *GateMismatch {
	if f&abandonedBit != 0 {
		f &^= abandonedBit
		q, _ := c.Missing(f)
		return &GateMismatch{Call: f, Rank: -1, Abandoned: true, Missing: q}
	}
	e0 := entryOf(c.entry(0, f))
	m := &GateMismatch{Call: f, Rank: -1, Rank0: e0}
	for q := 1; q < len(c.a.ranks); q++ {
		if e := entryOf(c.entry(q, f)); e != e0 {
			m.Rank, m.Theirs = q, e
			break
		}
	}
	return m
}

// Publish makes e this rank's next call and returns its number, which the
// GPU may wait for (Approved reaching it) when e.Gated. It publishes
// nothing and returns the *GateMismatch once a difference was found (on
// this call or an earlier one). A rank gateRing calls ahead of a peer
// waits for it first, bounded like an agreement (the timeout; a peer that
// exited at once).
func (c *CallGate) Publish(ctx context.Context, e GateEntry) (uint64, error) {
	if m := c.Failed(); m != nil {
		return 0, m
	}
	k := c.pub + 1
	if k > gateRing && atomic.LoadUint64(c.approved) < k-gateRing {
		if err := c.catchUp(ctx, k-gateRing); err != nil {
			return 0, err
		}
	}
	w := c.entry(c.a.me, k)
	copy(w[1:7], e.Record[:])
	w[7] = e.word()
	atomic.StoreUint64(&w[0], k)
	atomic.StoreUint64(c.myPub, k)
	c.pub = k
	want := c.want
	if e.Gated {
		for {
			v := atomic.LoadUint64(want)
			if v >= k || atomic.CompareAndSwapUint64(want, v, k) {
				break
			}
		}
		c.advance(k)
	} else if v := atomic.LoadUint64(want); v > c.Approved() {
		c.advance(v)
	}
	if atomic.LoadUint64(c.failed) != 0 {
		if m := c.Failed(); m.Call <= k {
			return k, m
		}
	}
	return k, nil
}

// advance approves calls in order up to upto while every rank has
// published them alike; it stops at a call some rank has not published
// yet, and at a difference (recording it and waking the watchers). Ranks
// may advance at once: every step is a compare-and-swap from the call
// before, and entries are read between two loads of the approval word (a
// slot is reused for call k+gateRing only after call k was approved).
func (c *CallGate) advance(upto uint64) {
	n := len(c.a.ranks)
	approved := c.approved
	for {
		a := atomic.LoadUint64(approved)
		if a >= upto || atomic.LoadUint64(c.failed) != 0 {
			return
		}
		k := a + 1
		for q := range n {
			if atomic.LoadUint64(c.word(q, wPub)) < k {
				return
			}
		}
		e0 := c.entry(0, k)
		same, gated := true, e0[7]&gatedBit != 0
		for q := 1; q < n; q++ {
			e := c.entry(q, k)
			gated = gated || e[7]&gatedBit != 0
			same = same && [7]uint64(e[1:8]) == [7]uint64(e0[1:8])
		}
		if atomic.LoadUint64(approved) != a {
			continue // another rank moved on: what was read may be stale
		}
		if !same && gated {
			if atomic.CompareAndSwapUint64(c.failed, 0, k) {
				c.Wake()
			}
			return
		}
		// Equal, or a difference on symmem's kernels on every rank (their
		// in-band check reports it): approved.
		atomic.CompareAndSwapUint64(approved, a, k)
	}
}

// catchUp advances the approval to k, waiting for the peers that have not
// published it (wait.Until): 1000 polls that yield after each, then naps,
// bounded by the timeout; a peer that exited is reported at once.
func (c *CallGate) catchUp(ctx context.Context, k uint64) error {
	return wait.Until(ctx, func() (bool, error) {
		c.advance(k)
		if c.Approved() >= k {
			return true, nil
		}
		if m := c.Failed(); m != nil {
			return false, m
		}
		return false, nil
	}, &wait.Options{
		Rounds: 1000, YieldEvery: 1, Timeout: c.a.timeout,
		Check: func(ctxErr error, expired bool) error {
			q, gone := c.Missing(c.Approved() + 1)
			if q < 0 && ctxErr == nil && !expired {
				return nil // every rank published it: the next advance approves it
			}
			if q < 0 { // published by all just as the wait ran out: Until asks cond once more
				return fmt.Errorf("%s: waiting for call %d's approval: %w", c.a.what, c.Approved()+1, cmp.Or(ctxErr, error(rendezvous.ErrTimeout)))
			}
			if gone != nil {
				return fmt.Errorf("%s: before call %d: %w", c.a.what, c.Approved()+1, gone)
			}
			if ctxErr != nil {
				return fmt.Errorf("%s: waiting for rank %d to make call %d: %w", c.a.what, c.a.ranks[q], c.Approved()+1, ctxErr)
			}
			if expired {
				return fmt.Errorf("%s: this rank is %d collectives ahead of rank %d, which did not make call %d within %v (it is not making the same calls, or it stopped): %w",
					c.a.what, gateRing, c.a.ranks[q], c.Approved()+1, c.a.timeout, rendezvous.ErrTimeout)
			}
			return nil
		},
	})
}

// Abandon marks the gate failed at call k (unless it failed already): a
// rank's watcher found that a peer it waits for will never make the call
// (its process exited, it closed, a call failed on it). Every rank's
// guard of a call from k on stops its context, as for a difference.
func (c *CallGate) Abandon(k uint64) {
	if atomic.CompareAndSwapUint64(c.failed, 0, k|abandonedBit) {
		c.Wake()
	}
}

// Missing returns the lowest group rank that has not published call k
// (-1 if every rank has) and, when it will not (HostAgreement.Gone), why.
func (c *CallGate) Missing(k uint64) (q int, gone error) {
	for q := range c.a.ranks {
		if atomic.LoadUint64(c.word(q, wPub)) < k {
			if q == c.a.me {
				return q, nil
			}
			return q, c.a.Gone(q, false)
		}
	}
	return -1, nil
}

// Rank is group rank q's global rank.
func (c *CallGate) Rank(q int) int { return c.a.ranks[q] }

// wakeAddr is the address of the wake word's first 32 bits: the futex word
// (the host is little-endian, so they are its low half).
func (c *CallGate) wakeAddr() uint64 {
	return hostmem.Addr(hostmem.AsBytes(c.a.words[0][wWake : wWake+1]))
}

// Wake wakes every rank's Sleep (on this host).
func (c *CallGate) Wake() {
	a := c.wakeAddr()
	atomic.AddUint32(hostmem.Uint32At(a), 1)
	hostmem.FutexWake(a, 0) // shared page: every process's sleepers
}

// Sleep blocks until a rank called Wake since the previous Sleep returned,
// or for d at most, without using a CPU: the watcher's wait, from one
// goroutine (check the gate after each return).
func (c *CallGate) Sleep(d time.Duration) {
	a := c.wakeAddr()
	w := hostmem.Uint32At(a)
	if v := atomic.LoadUint32(w); v != c.seen {
		c.seen = v
		return
	}
	hostmem.FutexWait(a, c.seen, d) // a wake, a change or the timeout: all mean look again
	c.seen = atomic.LoadUint32(w)
}
