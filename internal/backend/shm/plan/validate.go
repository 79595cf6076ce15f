package plan

import (
	"fmt"
	"slices"

	"github.com/symmem/symmem/coll"
)

// Validate checks one plan on its own: header fields, every step's
// references (in range, element-aligned, writes only to the own rank's Out
// or Scratch, Scratch never of a peer), phases, a Wait on a peer before any
// read of its buffers and a Signal to it after the last one, strictly
// increasing phases per peer, and that the data steps of each stage are
// independent. It cannot see peers' plans: use ValidateGroup and plantest.Simulate.
func Validate(p Plan) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("plan %v n=%d rank=%d: %s: %w", p.Kind, p.N, p.Rank, fmt.Sprintf(format, a...), ErrInvalid)
	}
	switch {
	case p.Kind < coll.AllGather || p.Kind > coll.AllToAll:
		return bad("unknown kind")
	case p.N < 1 || p.Rank < 0 || p.Rank >= p.N:
		return bad("rank outside the group")
	case !p.DType.Valid():
		return bad("unknown dtype %v", p.DType)
	case p.Op < coll.Sum || p.Op > coll.Max:
		return bad("unknown reduction %v", p.Op)
	case p.Phases < 0 || p.InBytes < 0 || p.OutBytes < 0 || p.ScratchBytes < 0:
		return bad("negative phase count or buffer size")
	}
	es := int64(p.DType.Size())
	size := map[Buf]int64{In: p.InBytes, Out: p.OutBytes, Scratch: p.ScratchBytes}
	lastSignal := make([]int, p.N) // last phase signalled to each peer, -1 = none
	lastWait := make([]int, p.N)
	firstWait := make([]int, p.N)   // step index of the first wait on each peer
	lastRead := make([]int, p.N)    // step index of the last read of each peer
	signalAfter := make([]int, p.N) // step index of the last signal to each peer
	for q := range p.N {
		lastSignal[q], lastWait[q], firstWait[q], lastRead[q], signalAfter[q] = -1, -1, -1, -1, -1
	}
	checkRef := func(i int, r Ref, n int64, what string) error {
		switch {
		case r.Buf > Scratch:
			return bad("step %d: %s %v: unknown buffer", i, what, r)
		case r.Rank < 0 || r.Rank >= p.N:
			return bad("step %d: %s %v: rank outside the group", i, what, r)
		case r.Buf == Scratch && r.Rank != p.Rank:
			return bad("step %d: %s %v: scratch is private to its rank", i, what, r)
		case r.Off < 0 || r.Off%es != 0:
			return bad("step %d: %s %v: offset not a non-negative multiple of the %d-byte element", i, what, r, es)
		case r.Off+n > size[r.Buf] && (!p.Splits || r.Rank == p.Rank): // a split plan's peers have other sizes
			return bad("step %d: %s %v + %d bytes exceeds the %d-byte %v buffer", i, what, r, n, size[r.Buf], r.Buf)
		}
		return nil
	}
	for i, s := range p.Steps {
		switch s.Op {
		case Copy, Reduce:
			if s.Bytes <= 0 || s.Bytes%es != 0 {
				return bad("step %d (%v): %d bytes is not a positive multiple of the %d-byte element", i, s, s.Bytes, es)
			}
			if s.Op == Copy && len(s.Srcs) != 1 || s.Op == Reduce && len(s.Srcs) < 1 {
				return bad("step %d (%v): wrong number of sources", i, s)
			}
			if err := checkRef(i, s.Dst, s.Bytes, "destination"); err != nil {
				return err
			}
			if s.Dst.Rank != p.Rank || s.Dst.Buf == In {
				return bad("step %d (%v): writes only go to the own rank's out or scratch", i, s)
			}
			for _, r := range s.Srcs {
				if err := checkRef(i, r, s.Bytes, "source"); err != nil {
					return err
				}
				if r.Rank != p.Rank {
					if firstWait[r.Rank] < 0 {
						return bad("step %d (%v): reads rank %d's %v before waiting for rank %d (missing Wait)", i, s, r.Rank, r.Buf, r.Rank)
					}
					lastRead[r.Rank] = i
				} else if r.Buf == s.Dst.Buf && r.Off != s.Dst.Off && overlap(r.Off, s.Dst.Off, s.Bytes, s.Bytes) {
					return bad("step %d (%v): source and destination partly overlap", i, s)
				}
			}
		case Signal, Wait:
			if s.Peer < 0 || s.Peer >= p.N || s.Peer == p.Rank {
				return bad("step %d (%v): peer must be another rank of the group", i, s)
			}
			if s.Phase < 0 || s.Phase >= p.Phases {
				return bad("step %d (%v): phase outside [0, %d)", i, s, p.Phases)
			}
			last := lastSignal
			if s.Op == Wait {
				last = lastWait
				if firstWait[s.Peer] < 0 {
					firstWait[s.Peer] = i
				}
			} else {
				signalAfter[s.Peer] = i
			}
			if s.Phase <= last[s.Peer] {
				return bad("step %d (%v): phases to/from one peer must strictly increase (previous %d)", i, s, last[s.Peer])
			}
			last[s.Peer] = s.Phase
		default:
			return bad("step %d: unknown op %v", i, s.Op)
		}
	}
	for q := range p.N {
		if lastRead[q] >= 0 && signalAfter[q] < lastRead[q] {
			return bad("rank %d's buffers are read (step %d) but no later Signal tells it the reads are done", q, lastRead[q])
		}
	}
	return validateStages(p, bad)
}

func overlap(a, b, na, nb int64) bool { return a < b+nb && b < a+na }

// validateStages checks that the data steps of a stage are independent:
// destinations pairwise disjoint, and no step reads own bytes another step
// of the stage writes.
func validateStages(p Plan, bad func(string, ...any) error) error {
	for _, st := range p.Stages() {
		steps := p.Steps[st[0]:st[1]]
		for i, a := range steps {
			for j, b := range steps {
				if i == j {
					continue
				}
				if i < j && a.Dst.Buf == b.Dst.Buf && overlap(a.Dst.Off, b.Dst.Off, a.Bytes, b.Bytes) {
					return bad("steps %d and %d of one stage write overlapping bytes of %v", st[0]+i, st[0]+j, a.Dst.Buf)
				}
				for _, r := range b.Srcs {
					if r.Rank == p.Rank && r.Buf == a.Dst.Buf && overlap(a.Dst.Off, r.Off, a.Bytes, b.Bytes) {
						return bad("step %d reads bytes that step %d of the same stage writes (separate them with a barrier)", st[0]+j, st[0]+i)
					}
				}
			}
		}
	}
	return nil
}

// ValidateGroup checks the n plans of one call together: each valid, all
// describing the same call (kind, sizes, dtype, op, root, phases), plans[i]
// being rank i's, and for every ordered pair of ranks the phases one signals
// to the other equal the phases the other waits for (a Wait without its
// Signal deadlocks; a Signal without its Wait means a barrier is missing).
func ValidateGroup(plans []Plan) error {
	if len(plans) == 0 {
		return fmt.Errorf("plan: no plans: %w", ErrInvalid)
	}
	p0 := plans[0]
	for i, p := range plans {
		if err := Validate(p); err != nil {
			return err
		}
		if p.N != len(plans) || p.Rank != i {
			return fmt.Errorf("plan: plans[%d] is rank %d of %d, want rank %d of %d: %w", i, p.Rank, p.N, i, len(plans), ErrInvalid)
		}
		if p.Kind != p0.Kind || p.DType != p0.DType || p.Op != p0.Op || p.Root != p0.Root || p.Count != p0.Count ||
			p.InPlace != p0.InPlace || p.OneShot != p0.OneShot || p.Splits != p0.Splits || p.Phases != p0.Phases ||
			!p.Splits && (p.InBytes != p0.InBytes || p.OutBytes != p0.OutBytes) {
			return fmt.Errorf("plan: rank %d's plan describes a different call than rank 0's: %w", i, ErrInvalid)
		}
	}
	n := len(plans)
	for a := range n {
		for b := range n {
			if a == b {
				continue
			}
			var sent, waited []int
			for _, s := range plans[a].Steps {
				if s.Op == Signal && s.Peer == b {
					sent = append(sent, s.Phase)
				}
			}
			for _, s := range plans[b].Steps {
				if s.Op == Wait && s.Peer == a {
					waited = append(waited, s.Phase)
				}
			}
			if !slices.Equal(sent, waited) {
				return fmt.Errorf("plan: rank %d signals rank %d phases %v but rank %d waits for %v: %w", a, b, sent, b, waited, ErrInvalid)
			}
		}
	}
	return nil
}
