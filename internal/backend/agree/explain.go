package agree

import (
	"fmt"

	"github.com/symmem/symmem/coll"
)

// Call is a call as ranks compare it where they could take different
// paths: its record and the path that runs it ("" where the path is not
// compared). The kernels' digest covers both, and so does the
// gate's entry.
type Call struct {
	Record Record
	Path   coll.Algo
}

// Explain names how call a of global rank ra differs from call b of rank
// rb, with the fix: the collective, the argument with both values, or the
// paths; ok is false when they are equal or not both call records. Every
// place that names a difference between two calls says it alike: the CPU
// backend's in-band agreement and checked mode (through Disagreement.Explain), the
// GPU kernels' reports and the call gate.
func Explain(ra int, a Call, rb int, b Call) (what string, ok bool) {
	if a.Record == b.Record {
		if a.Path == b.Path || a.Record.What() != RecCall {
			return "", false
		}
		return fmt.Sprintf("rank %d ran it on %s, rank %d on %s (every rank must force the same algorithm, and pass arguments for which auto chooses alike)",
			ra, a.Path, rb, b.Path), true
	}
	arg, va, vb, ok := Diff(a.Record, b.Record)
	switch {
	case !ok:
		return "", false
	case arg == "collective":
		return fmt.Sprintf("rank %d called %v, rank %d %v (every rank must make the same collectives in the same order)", ra, va, rb, vb), true
	}
	return fmt.Sprintf("rank %d called %v with %s=%v, rank %d with %s=%v (every rank must pass the same; buffers at the same pool offset: allocate them with the same Alloc calls in the same order)",
		ra, Kind(b.Record), arg, va, rb, arg, vb), true
}

// Explain names the difference d found (on a collective: an in-band
// agreement, or checked mode's store exchange): a rank at another call of
// the group, a rank ending a scope where the other calls a collective, or
// the collective's difference (Explain). ranks maps group ranks to global
// ones.
func (d *Disagreement) Explain(ranks []int) string {
	r, r0 := ranks[d.Rank], ranks[0]
	if d.Seq != d.Rank0Seq {
		return fmt.Sprintf("rank %d is at another collective or scope end of the group than rank %d (a rank skipped or added one)", r, r0)
	}
	a, b := d.Theirs, d.Rank0
	if what, ok := Explain(r, Call{Record: a}, r0, Call{Record: b}); ok {
		return what
	}
	doing := func(x Record) string {
		switch x.What() {
		case RecCall:
			return "called " + Kind(x).String()
		case RecScopeEnd:
			return "is ending a scope"
		case RecWorld:
			return "is at a world call (NewGroup or Group.Close)"
		}
		return fmt.Sprintf("sent record %x", x)
	}
	return fmt.Sprintf("rank %d %s, rank %d %s", r, doing(a), r0, doing(b))
}
