package agree

import (
	"context"
	"errors"
	"fmt"

	"github.com/symmem/symmem/internal/errs"
)

// Record is a small fixed-size description of what a rank is about to do
// (end a scope of a group, run a collective with given arguments) that the
// ranks of a group compare before acting. Word 0's top byte says what the
// record describes (RecScopeEnd, or another user's value); the rest is
// interpreted by whoever made the record.
type Record [6]uint64

// Kinds of records (top byte of word 0).
const (
	RecScopeEnd = 1 // made by the pool at Scope.End
	RecCall     = 2 // made by the user API for a collective call (CallRecord)
	RecWorld    = 3 // made by the user API for a world call (WorldRecord)
)

// What returns the kind of record (its top byte).
func (r Record) What() uint8 { return uint8(r[0] >> 56) }

// Agreer compares a Record across the ranks of a group in-band, without a
// store round trip (the CPU backend uses its signal pads): a group's
// agreement where it has one (pool.Group's Agreer). Agree is collective
// over the group: it returns nil when every rank passed the same record,
// and otherwise an error wrapping a *Disagreement, which every rank
// receives alike. Groups without one are compared through the store.
type Agreer interface {
	Agree(ctx context.Context, mine Record) error
}

// Disagreement says which ranks' records differ: the lowest group rank whose
// record (or call position, Seq) differs from group rank 0's. It wraps
// errs.Mismatch (the user's ErrMismatch).
type Disagreement struct {
	Rank          int    // group rank that differs from rank 0
	Theirs, Rank0 Record // its record and rank 0's
	Seq, Rank0Seq uint64 // call positions, where the backend has them
	// AllKind: the kind every rank's record has, all at one position
	// (AllKind), else 0. Where it is the kind of the caller's own step
	// (every rank is ending a scope, or at a world call), every rank may go
	// on to name the difference through the store; a rank in a collective
	// never would.
	AllKind uint8
}

// AllKind returns the kind the records of all n ranks (rec(q): group rank
// q's record and call position) share, all at one position, else 0: the
// same answer on every rank, which read the same records.
func AllKind(n int, rec func(q int) (Record, uint64)) uint8 {
	r0, s0 := rec(0)
	for q := 1; q < n; q++ {
		if r, s := rec(q); r.What() != r0.What() || s != s0 {
			return 0
		}
	}
	return r0.What()
}

func (d *Disagreement) Error() string {
	if d.Seq != d.Rank0Seq {
		return fmt.Sprintf("rank %d is at another call of the group than rank 0 (position %d vs %d: a rank skipped or added a collective or scope end)", d.Rank, d.Seq, d.Rank0Seq)
	}
	if d.Theirs.What() == RecScopeEnd && d.Rank0.What() == RecScopeEnd {
		return fmt.Sprintf("rank %d's allocations differ from rank 0's (%d vs %d segments to register, allocation states %#x vs %#x): every rank must make the same Alloc/Free calls in the same order",
			d.Rank, d.Theirs[3], d.Rank0[3], d.Theirs[2], d.Rank0[2])
	}
	return fmt.Sprintf("rank %d's record %x differs from rank 0's %x", d.Rank, d.Theirs, d.Rank0)
}

func (d *Disagreement) Unwrap() error { return errs.Mismatch }

// FirstDisagreement compares every rank's record (and call position) with
// group rank 0's and returns the first that differs, or nil.
func FirstDisagreement(recs []Record, seqs []uint64) *Disagreement {
	for r := 1; r < len(recs); r++ {
		if recs[r] != recs[0] || (seqs != nil && seqs[r] != seqs[0]) {
			d := &Disagreement{Rank: r, Theirs: recs[r], Rank0: recs[0]}
			if seqs != nil {
				d.Seq, d.Rank0Seq = seqs[r], seqs[0]
			}
			d.AllKind = AllKind(len(recs), func(q int) (Record, uint64) {
				if seqs == nil {
					return recs[q], 0
				}
				return recs[q], seqs[q]
			})
			return d
		}
	}
	return nil
}

// AsDisagreement returns the *Disagreement err wraps, or nil.
func AsDisagreement(err error) *Disagreement {
	var d *Disagreement
	if errors.As(err, &d) {
		return d
	}
	return nil
}
