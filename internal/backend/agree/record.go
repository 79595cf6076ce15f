package agree

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/symmem/symmem/coll"
)

// A call record (a Record of kind RecCall) is what every rank
// must pass alike to a collective for its result to be right. The user API
// builds it (CallRecord) into backend.Request.Record; the transports carry
// it or its digest, and Diff and Explain name a difference.
//
//	word 0: RecCall<<56 | kind<<48 | dtype<<40 | op<<32 | flags (InPlace, Staged)
//	word 1: root
//	word 2: count
//	word 3: in's pool location (Loc), 0 for ordinary memory
//	word 4: out's pool location
//	word 5: an all-to-all's device split counts' pool location (SplitsRecord), else 0
const (
	InPlace    = 1 << iota // the call is in place
	Staged                 // the buffers are ordinary memory (staged through the pool)
	HostSplits             // all-to-all with split counts on the host (count is 0)
	DevSplits              // all-to-all with split counts in symmetric memory (count is 0)
)

// Loc is a buffer's pool location in a call record: segment<<48 | offset
// (seg: a pool.SegmentID).
func Loc(seg uint64, off int64) uint64 {
	return seg<<48 | uint64(off)&(1<<48-1)
}

// CallRecord is the record of a collective: in and out are the buffers'
// pool locations (Loc; 0 for ordinary memory), flags InPlace and Staged. A
// staged call's record holds no locations (ordinary memory is anywhere),
// and a location that is rank-dependent by construction is left out: the
// broadcast's in (it is out), an in-place all-gather's in and an in-place
// reduce-scatter's out (this rank's slice of the other buffer, whose
// location is what must agree).
func CallRecord(kind coll.Kind, dt coll.DType, op coll.ReduceOp, root int, count int64, flags uint64, in, out uint64) Record {
	r := Record{RecCall<<56 | uint64(kind)<<48 | uint64(dt)<<40 | uint64(op)<<32 | flags,
		uint64(root), uint64(count)}
	if flags&Staged == 0 {
		r[3], r[4] = in, out
		switch {
		case kind == coll.Broadcast || flags&InPlace != 0 && kind == coll.AllGather:
			r[3] = 0
		case flags&InPlace != 0 && kind == coll.ReduceScatter:
			r[4] = 0
		}
	}
	return r
}

// SplitsRecord is CallRecord of an all-to-all whose split counts lie in
// symmetric memory at pool location splits: peers read them there.
func SplitsRecord(dt coll.DType, flags uint64, in, out, splits uint64) Record {
	r := CallRecord(coll.AllToAll, dt, 0, 0, 0, flags|DevSplits, in, out)
	r[5] = splits
	return r
}

// WorldRecord is the record of a world call (NewGroup, Group.Close): what
// and its arguments as text, hashed (words 1-4, 256 bits), so that the
// world group's in-band agreement meets a peer that is at a collective or
// scope end of the world instead of waiting for it in the store. The store
// exchange after it names a difference between two world calls.
func WorldRecord(what, args string) Record {
	h := sha256.Sum256([]byte(what + "\x00" + args))
	r := Record{RecWorld << 56}
	for i := range 4 {
		r[1+i] = binary.LittleEndian.Uint64(h[8*i:])
	}
	return r
}

// Kind is the collective a call record describes.
func Kind(r Record) coll.Kind { return coll.Kind(r[0] >> 48 & 0xff) }

// Diff names the first argument in which call records a and b differ (the
// collective first, then dtype, op, root, the all-to-all's split form,
// count, in-place, staging, in offset, out offset, split counts offset) and both values; ok is false when both are call
// records and equal, or either is not a call record.
func Diff(a, b Record) (arg string, va, vb any, ok bool) {
	if a.What() != RecCall || b.What() != RecCall || a == b {
		return "", nil, nil, false
	}
	field := func(w uint64, shift uint) uint64 { return w >> shift & 0xff }
	switch {
	case field(a[0], 48) != field(b[0], 48):
		return "collective", Kind(a), Kind(b), true
	case field(a[0], 40) != field(b[0], 40):
		return "dtype", coll.DType(field(a[0], 40)), coll.DType(field(b[0], 40)), true
	case field(a[0], 32) != field(b[0], 32):
		return "op", coll.ReduceOp(field(a[0], 32)), coll.ReduceOp(field(b[0], 32)), true
	case a[1] != b[1]:
		return "root", a[1], b[1], true
	case a[0]&(HostSplits|DevSplits) != b[0]&(HostSplits|DevSplits):
		return "split counts", splitsString(a[0]), splitsString(b[0]), true
	case a[2] != b[2]:
		return "count", a[2], b[2], true
	case a[0]&InPlace != b[0]&InPlace:
		return "in-place", a[0]&InPlace != 0, b[0]&InPlace != 0, true
	case a[0]&Staged != b[0]&Staged:
		return "staged (ordinary memory)", a[0]&Staged != 0, b[0]&Staged != 0, true
	case a[3] != b[3]:
		return "in offset", locString(a[3]), locString(b[3]), true
	case a[4] != b[4]:
		return "out offset", locString(a[4]), locString(b[4]), true
	case a[5] != b[5]:
		return "split counts offset", locString(a[5]), locString(b[5]), true
	}
	return "record", fmt.Sprintf("%x", a), fmt.Sprintf("%x", b), true
}

func locString(l uint64) string {
	return fmt.Sprintf("segment %d + %#x", l>>48, l&(1<<48-1))
}

// splitsString names an all-to-all's form from a record's first word.
func splitsString(w uint64) string {
	switch {
	case w&HostSplits != 0:
		return "on the host"
	case w&DevSplits != 0:
		return "in symmetric memory"
	}
	return "none (equal blocks)"
}
