package shm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/internal/wait"
)

// Signal pads (the protocol of package plan). Every rank owns one pad (a
// memfd page or more) that all group peers map. The pad holds one cache line
// per target peer: word 0 is the value this rank last signalled to that
// target, word 1 counts the target's sleepers so the owner only issues a
// futex wake when someone sleeps. After them come the record slots
// (agree.go), one line with the owner's state (members.StateLeft,
// StateFailed), which a peer's wait reads between sleeps, and the
// all-to-all count slots (alltoall.go). Values only grow (epochs): in a call with
// epoch base E, a Signal of phase k stores E+k+1 and a Wait for phase k
// returns once the word is >= E+k+1 (wrap-aware), so nothing is ever reset.
const padLine = 64 // bytes per target: one cache line, no false sharing

// waitSpin is how long a Wait polls before it sleeps on the futex, for a
// process that shares this host with localRanks ranks. Waking a sleeping
// thread can cost tens of microseconds (an idle virtual CPU must be
// woken), as long as a 1 MiB step takes, so a rank with a CPU of its own
// polls for 200 us (Open MPI's shared-memory transport polls without end);
// where the ranks outnumber the CPUs, a polling rank takes the CPU its peer
// needs, so it polls for 20 us only.
func waitSpin(localRanks int) time.Duration {
	if runtime.NumCPU() > max(localRanks, 1) {
		return 200 * time.Microsecond
	}
	return 20 * time.Microsecond
}

// pads is one group's view of all pads.
type pads struct {
	n, me int
	spin  time.Duration                                // how long wait polls before it sleeps
	fd    int                                          // this rank's pad memfd
	mem   []byte                                       // this rank's pad
	peers [][]byte                                     // peers' pads by group rank (peers[me] aliases mem)
	recs  [][recSlots]*[1 + len(agree.Record{})]uint64 // record slots (agree.go)
}

func padSize(n int) int64 {
	b := int64((n+recSlots+1)*padLine) + recSlots*countsBytes(n)
	pg := int64(os.Getpagesize())
	return (b + pg - 1) / pg * pg
}

func newPads(n, me int) (*pads, error) {
	fd, mem, err := newShared("symmem-pad", padSize(n))
	if err != nil {
		return nil, fmt.Errorf("signal pad: %w", err)
	}
	p := &pads{n: n, me: me, spin: waitSpin(1), fd: fd, mem: mem, peers: make([][]byte, n)}
	p.peers[me] = mem
	return p, nil
}

// word is the address of the value owner signals to target.
func (p *pads) word(owner, target int) uint64 {
	return hostmem.Addr(p.peers[owner]) + uint64(target*padLine)
}

// signal stores v as this rank's signal to peer to (release) and wakes to
// if it sleeps.
func (p *pads) signal(to int, v uint32) error {
	a := p.word(p.me, to)
	atomic.StoreUint32(hostmem.Uint32At(a), v)
	if atomic.LoadUint32(hostmem.Uint32At(a+4)) != 0 {
		return hostmem.FutexWake(a, 0)
	}
	return nil
}

// state is owner's state word (the line after the record slots).
func (p *pads) state(owner int) *uint32 {
	return hostmem.Uint32At(hostmem.Addr(p.peers[owner]) + uint64((p.n+recSlots)*padLine))
}

// setState sets bits in this rank's state word and wakes the peers
// sleeping on this rank's signals, so their waits look at it at once. On
// closed pads (a Leave after the group's Close) there is nothing to tell.
func (p *pads) setState(bits uint32) {
	if p.peers == nil {
		return
	}
	atomic.OrUint32(p.state(p.me), bits)
	for q := range p.n {
		if q != p.me {
			hostmem.FutexWake(p.word(p.me, q), 0)
		}
	}
}

// arrived reports whether from has signalled at least v (no waiting).
func (p *pads) arrived(from int, v uint32) bool {
	return wait.Reached(atomic.LoadUint32(hostmem.Uint32At(p.word(from, p.me))), v)
}

// wait returns once from's signal to this rank reaches v (acquire). It polls
// for p.spin, then sleeps on the futex in slices (wait.Until), checking
// between slices that the peer still takes part (alive: its process lives,
// it did not close or fail; it wakes this sleep when it closes or fails) and
// that neither ctx nor deadline passed.
func (p *pads) wait(ctx context.Context, from int, v uint32, deadline time.Time, alive func(int) error) error {
	a := p.word(from, p.me)
	w := hostmem.Uint32At(a)
	if wait.Reached(atomic.LoadUint32(w), v) {
		return nil
	}
	var ended bool // Check ended the wait: its error is worded already
	err := wait.Until(ctx, nil, &wait.Options{
		Spin: p.spin, Deadline: &deadline,
		Futex: a, Target: v, Sleepers: a + 4, // slices of wait.Slice between liveness checks
		Check: func(ctxErr error, expired bool) error {
			ended = true
			switch {
			case ctxErr != nil:
				return fmt.Errorf("waiting for rank %d: %w", from, ctxErr)
			case expired:
				return fmt.Errorf("did not signal within the timeout (waited for signal %d, last seen %d): %w",
					v, atomic.LoadUint32(w), context.DeadlineExceeded)
			}
			if err := alive(from); err != nil {
				return err // unless it signalled, then left: not a failure (Until looks once more)
			}
			ended = false
			return nil
		},
	})
	if err != nil && !ended {
		return fmt.Errorf("waiting for rank %d: %w", from, err) // the futex failed
	}
	return err
}

func (p *pads) close() {
	for r, m := range p.peers {
		if r != p.me && m != nil {
			unix.Munmap(m)
		}
	}
	if p.mem != nil {
		unix.Munmap(p.mem)
		unix.Close(p.fd)
	}
	p.mem, p.peers, p.recs = nil, nil, nil
}
