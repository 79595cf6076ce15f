package backend

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/pool"
)

// A collective's argument record (Request.Check, pool.Record of kind
// pool.RecCall): what every rank must pass alike for the result to be
// right. The user API builds it; backends compare it (or a fingerprint of
// it) across the ranks, and both name a difference with CallDiff.
//
//	word 0: RecCall<<56 | kind<<48 | dtype<<40 | op<<32 | flags (CallInPlace, CallStaged)
//	word 1: root
//	word 2: count
//	word 3: in's pool location (segment<<48 | offset), 0 for ordinary memory
//	word 4: out's pool location
const (
	CallInPlace = 1 << iota // the call is in place
	CallStaged              // the buffers are ordinary memory (staged through the pool)
)

// CallKind is the collective a call record describes.
func CallKind(r pool.Record) coll.Kind { return coll.Kind(r[0] >> 48 & 0xff) }

// CallDiff names the first argument in which call records a and b differ
// (the collective first, then dtype, op, root, count, in-place, staging, in
// offset, out offset) and both values; ok is false when both are call
// records and equal, or either is not a call record.
func CallDiff(a, b pool.Record) (arg string, va, vb any, ok bool) {
	if a.What() != pool.RecCall || b.What() != pool.RecCall || a == b {
		return "", nil, nil, false
	}
	field := func(w uint64, shift uint) uint64 { return w >> shift & 0xff }
	switch {
	case field(a[0], 48) != field(b[0], 48):
		return "collective", CallKind(a), CallKind(b), true
	case field(a[0], 40) != field(b[0], 40):
		return "dtype", coll.DType(field(a[0], 40)), coll.DType(field(b[0], 40)), true
	case field(a[0], 32) != field(b[0], 32):
		return "op", coll.ReduceOp(field(a[0], 32)), coll.ReduceOp(field(b[0], 32)), true
	case a[1] != b[1]:
		return "root", a[1], b[1], true
	case a[2] != b[2]:
		return "count", a[2], b[2], true
	case a[0]&CallInPlace != b[0]&CallInPlace:
		return "in-place", a[0]&CallInPlace != 0, b[0]&CallInPlace != 0, true
	case a[0]&CallStaged != b[0]&CallStaged:
		return "staged (ordinary memory)", a[0]&CallStaged != 0, b[0]&CallStaged != 0, true
	case a[3] != b[3]:
		return "in offset", locString(a[3]), locString(b[3]), true
	case a[4] != b[4]:
		return "out offset", locString(a[4]), locString(b[4]), true
	}
	return "record", fmt.Sprintf("%x", a), fmt.Sprintf("%x", b), true
}

func locString(l uint64) string {
	return fmt.Sprintf("segment %d + %#x", l>>48, l&(1<<48-1))
}
