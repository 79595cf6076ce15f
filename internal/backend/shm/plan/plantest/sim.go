package plantest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend/shm/plan"
	"github.com/symmem/symmem/reduce"
)

// Errors reported by Simulate.
var (
	ErrDeadlock = errors.New("plan: deadlock")
	ErrRace     = errors.New("plan: unordered access to a peer's buffer")
)

// Buffers are one rank's memory for Simulate.
type Buffers struct {
	In, Out []byte
}

// SimOptions tune Simulate.
type SimOptions struct {
	// Calls runs the plans this many times back to back (default 1),
	// advancing the epoch base by Plan.Phases between calls as a backend
	// does: ranks may drift into the next call while peers finish this one.
	Calls int
	// Seed picks the interleaving of ranks (a different seed, a different
	// schedule; the happens-before checker does not depend on it).
	Seed uint64
	// Epoch is the epoch base of the first call, and the value every signal
	// word holds at the start (a fresh pad holds 0 with base 0). Set it near
	// 2^32 to exercise the wrap.
	Epoch uint32
}

// Simulate executes the plans of one group (plans[r] is rank r's) against
// bufs (bufs[r] is rank r's In and Out, at least Plan.InBytes and
// Plan.OutBytes long; results land in Out). It interleaves the ranks one
// step at a time, honours waits with the epoch protocol of the package doc,
// and reports:
//   - ErrDeadlock when every unfinished rank waits for a signal that never
//     comes (the error names each stuck wait);
//   - ErrRace when an access to a rank's buffer conflicts with another
//     rank's access (or the caller's use of its buffers before and after the
//     call) without a happens-before order given by signals and waits:
//     e.g. reading a peer's input before it signalled, or a rank returning
//     while a peer still reads its memory.
//
// ValidateGroup runs first.
func Simulate(plans []plan.Plan, bufs []Buffers, o SimOptions) error {
	if err := plan.ValidateGroup(plans); err != nil {
		return err
	}
	n := len(plans)
	if len(bufs) != n {
		return fmt.Errorf("plan: Simulate: %d buffer sets for %d plans: %w", len(bufs), n, plan.ErrInvalid)
	}
	for r, b := range bufs {
		if int64(len(b.In)) < plans[r].InBytes || int64(len(b.Out)) < plans[r].OutBytes {
			return fmt.Errorf("plan: Simulate: rank %d has in=%d out=%d bytes, plan needs %d and %d: %w",
				r, len(b.In), len(b.Out), plans[r].InBytes, plans[r].OutBytes, plan.ErrInvalid)
		}
	}
	s := newSim(plans, bufs, max(o.Calls, 1))
	s.setEpoch(o.Epoch)
	return s.run(n, rand.New(rand.NewPCG(o.Seed, 0x5eed)))
}

// run steps randomly chosen runnable ranks until every rank is done, a step
// fails, or no rank can move (a deadlock naming the stuck waits).
func (s *sim) run(n int, rng *rand.Rand) error {
	for {
		var runnable, live []int
		for r := range n {
			if s.ranks[r].done {
				continue
			}
			live = append(live, r)
			if s.ready(r) {
				runnable = append(runnable, r)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if len(runnable) == 0 {
			return s.deadlock(live)
		}
		if err := s.step(runnable[rng.IntN(len(runnable))]); err != nil {
			return err
		}
	}
}

type access struct {
	lo, hi int64
	rank   int
	write  bool
	clock  int // the accessing rank's own clock component at the access
	what   string
}

type simRank struct {
	pc, call int
	base     uint32
	vc       []int
	done     bool
	scratch  []byte
}

type sim struct {
	plans   []plan.Plan
	bufs    []Buffers
	calls   int
	ranks   []simRank
	slot    [][]uint32 // slot[to][from]
	slotVC  [][][]int  // clock of the signal last stored in slot[to][from]
	history map[[2]int][]access
}

func newSim(plans []plan.Plan, bufs []Buffers, calls int) *sim {
	n := len(plans)
	s := &sim{plans: plans, bufs: bufs, calls: calls, ranks: make([]simRank, n),
		slot: make([][]uint32, n), slotVC: make([][][]int, n), history: map[[2]int][]access{}}
	for r := range n {
		s.ranks[r] = simRank{vc: make([]int, n), scratch: make([]byte, plans[r].ScratchBytes)}
		s.slot[r] = make([]uint32, n)
		s.slotVC[r] = make([][]int, n)
		_ = s.callerOwns(r, "the caller's writes before the call") // nothing recorded yet: cannot conflict
	}
	return s
}

// callerOwns records that the caller of rank r may write all of r's buffers
// now (before a call, and after it returns).
func (s *sim) callerOwns(r int, what string) error {
	s.ranks[r].vc[r]++
	for _, b := range []plan.Buf{plan.In, plan.Out} {
		if n := int64(len(s.mem(r, b))); n > 0 {
			if err := s.record(r, b, r, 0, n, true, fmt.Sprintf("rank %d: %s", r, what)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sim) setEpoch(e uint32) {
	for r := range s.ranks {
		s.ranks[r].base = e
		for q := range s.slot[r] {
			s.slot[r][q] = e
		}
	}
}

func (s *sim) mem(owner int, b plan.Buf) []byte {
	switch b {
	case plan.In:
		return s.bufs[owner].In[:s.plans[owner].InBytes]
	case plan.Out:
		return s.bufs[owner].Out[:s.plans[owner].OutBytes]
	}
	return s.ranks[owner].scratch
}

func (s *sim) want(r int, phase int) uint32 { return plan.Target(s.ranks[r].base, phase) }

func (s *sim) ready(r int) bool {
	st := s.plans[r].Steps
	if s.ranks[r].pc >= len(st) || st[s.ranks[r].pc].Op != plan.Wait {
		return true
	}
	w := st[s.ranks[r].pc]
	return plan.Reached(s.slot[r][w.Peer], s.want(r, w.Phase))
}

func (s *sim) step(r int) error {
	rk, p := &s.ranks[r], s.plans[r]
	if rk.pc == len(p.Steps) { // call finished
		rk.base += uint32(p.Phases)
		rk.call++
		rk.pc = 0
		if rk.call == s.calls {
			rk.done = true
			return s.callerOwns(r, "the caller reusing its buffers after the last call returned")
		}
		return s.callerOwns(r, fmt.Sprintf("the caller's writes between calls %d and %d", rk.call-1, rk.call))
	}
	st := p.Steps[rk.pc]
	what := fmt.Sprintf("rank %d call %d step %d (%v)", r, rk.call, rk.pc, st)
	rk.pc++
	rk.vc[r]++
	switch st.Op {
	case plan.Signal:
		v := s.want(r, st.Phase)
		if old := s.slot[st.Peer][r]; plan.Reached(old, v) {
			return fmt.Errorf("plan: %s stores %d but the word already holds %d (signals must increase): %w", what, v, old, plan.ErrInvalid)
		}
		s.slot[st.Peer][r] = v
		s.slotVC[st.Peer][r] = append([]int(nil), rk.vc...)
	case plan.Wait:
		for i, c := range s.slotVC[r][st.Peer] {
			rk.vc[i] = max(rk.vc[i], c)
		}
	case plan.Copy, plan.Reduce:
		srcs := make([][]byte, len(st.Srcs))
		for i, ref := range st.Srcs {
			if err := s.record(ref.Rank, ref.Buf, r, ref.Off, st.Bytes, false, what); err != nil {
				return err
			}
			srcs[i] = s.mem(ref.Rank, ref.Buf)[ref.Off : ref.Off+st.Bytes]
		}
		if err := s.record(st.Dst.Rank, st.Dst.Buf, r, st.Dst.Off, st.Bytes, true, what); err != nil {
			return err
		}
		dst := s.mem(st.Dst.Rank, st.Dst.Buf)[st.Dst.Off : st.Dst.Off+st.Bytes]
		if st.Op == plan.Copy {
			copy(dst, srcs[0])
			return nil
		}
		if err := reduce.ReduceN(dst, srcs, p.DType, p.Op); err != nil {
			return fmt.Errorf("plan: %s: %w", what, err)
		}
		if p.Op == coll.Avg {
			return reduce.Finish(dst, p.DType, p.Op, len(srcs))
		}
	}
	return nil
}

// record checks an access by rank r to owner's buffer b against earlier
// conflicting accesses by other ranks and remembers it.
func (s *sim) record(owner int, b plan.Buf, r int, off, n int64, write bool, what string) error {
	key := [2]int{owner, int(b)}
	a := access{lo: off, hi: off + n, rank: r, write: write, clock: s.ranks[r].vc[r], what: what}
	h := s.history[key]
	kept := h[:0]
	for _, e := range h {
		conflict := e.rank != r && (write || e.write) && e.lo < a.hi && a.lo < e.hi
		ordered := e.clock <= s.ranks[r].vc[e.rank]
		if conflict && !ordered {
			return fmt.Errorf("plan: %s and %s touch bytes [%d,%d) of rank %d's %v with no signal/wait ordering them: %w",
				e.what, what, max(e.lo, a.lo), min(e.hi, a.hi), owner, b, ErrRace)
		}
		// A write covering an earlier, ordered access supersedes it.
		if !(write && ordered && e.lo >= a.lo && e.hi <= a.hi) {
			kept = append(kept, e)
		}
	}
	s.history[key] = append(kept, a)
	return nil
}

func (s *sim) deadlock(live []int) error {
	var b strings.Builder
	for _, r := range live {
		rk := s.ranks[r]
		w := s.plans[r].Steps[rk.pc]
		fmt.Fprintf(&b, "; rank %d call %d step %d (%v) waits for word %d, which holds %d",
			r, rk.call, rk.pc, w, s.want(r, w.Phase), s.slot[r][w.Peer])
	}
	return fmt.Errorf("plan: no rank can proceed%s: %w", b.String(), ErrDeadlock)
}
