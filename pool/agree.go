package pool

import "github.com/symmem/symmem/internal/backend/agree"

// Agreer is the group's in-band agreement (Group.Agreer): the agreement's
// own type, named here so that a Group outside this module can declare it
// (returning nil compares through Group.AllGather).
type Agreer = agree.Agreer

// scopeRecord describes a scope end: the pool's allocation state (its live
// blocks and segments, allocState) and the segments the group is about to
// register.
func scopeRecord(st allocState, segs []Segment) agree.Record {
	var h uint64
	for _, s := range segs {
		h = mix64(h ^ uint64(s.ID))
		h = mix64(h ^ uint64(s.Size))
	}
	var last SegmentID
	if len(segs) > 0 {
		last = segs[len(segs)-1].ID
	}
	return agree.Record{agree.RecScopeEnd << 56, uint64(st.next), st.h, uint64(len(segs)), uint64(last), h}
}
