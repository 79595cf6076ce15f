package pool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// The allocation log. Every Alloc and Free appends an entry; a polynomial
// rolling hash h(i) = h(i-1)*logBase + hash(entry i) (mod 2^64) over all
// entries lets any range be hashed in O(log n) from the hashes at its ends:
// hash(a, b] = h(b) - h(a)*logBase^(b-a). A group remembers (seq, h) at its
// last successful check, so checking costs O(1) memory per group and nothing
// per Alloc beyond one hash. The last logKeep entries are kept in a ring; they
// are exchanged only when hashes differ, to name the first differing entry.
// 1024 entries bound both the memory (40 KiB) and that second message.

const (
	opAlloc     uint8 = 1
	opFree      uint8 = 2
	logKeep           = 1024
	logBase           = 0x100000001b3 // odd
	entrySz           = 1 + 8*4
	recMagic          = 0x31504d53 // "SMP1"
	roundRecord uint8 = 1          // round 1: the records
	roundDetail uint8 = 2          // round 2: log entries
	roundBlocks uint8 = 3          // round 2: live blocks
)

type logEntry struct {
	op    uint8
	size  int64
	align int64
	seg   SegmentID
	off   int64
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (e logEntry) hash() uint64 {
	h := mix64(uint64(e.op) + 0x9e3779b97f4a7c15)
	for _, v := range [...]uint64{uint64(e.size), uint64(e.align), uint64(e.seg), uint64(e.off)} {
		h = mix64(h ^ v)
	}
	return h
}

func (e logEntry) String() string {
	if e.op == opAlloc {
		return fmt.Sprintf("Alloc(%d,%d)=seg%d+%#x", e.size, e.align, e.seg, e.off)
	}
	return fmt.Sprintf("Free(seg%d+%#x,%d bytes)", e.seg, e.off, e.size)
}

type allocLog struct {
	seq  uint64 // entries ever appended
	h    uint64
	ring [logKeep]logEntry
}

func (l *allocLog) add(e logEntry) {
	l.ring[l.seq%logKeep] = e
	l.seq++
	l.h = l.h*logBase + e.hash()
}

func powBase(n uint64) uint64 {
	r, b := uint64(1), uint64(logBase)
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r *= b
		}
		b *= b
	}
	return r
}

// allocState is what symmetric memory needs every rank's pool to share,
// compared at scope ends and trims: the live blocks (each as its Alloc
// call and result: size asked, alignment, segment, offset) and the
// segments, as a sum of hashes kept up to date by Alloc, Free and segment
// creation and release, and the number of segments ever created. Unlike
// the log it forgets what was undone: ranks whose allocations differed
// agree again once each freed what differed. The segment count does not
// go back: ids are never reused, so ranks that created different numbers
// of segments would differ on every later one.
type allocState struct {
	next SegmentID // segments ever created
	h    uint64
}

func (p *Pool) stateLocked() allocState { return allocState{next: p.nextID, h: p.stateH} }

func segHash(id SegmentID, size int64) uint64 {
	return mix64(mix64(uint64(id)^0x5e67) ^ uint64(size))
}

// mark is a position in the log.
type mark struct{ seq, h uint64 }

func (l *allocLog) mark() mark { return mark{l.seq, l.h} }

func rangeHash(from, to mark) uint64 { return to.h - from.h*powBase(to.seq-from.seq) }

// kept returns the entries of (from, to] still in the ring and the 1-based
// index (counted from `from`) of the first one.
func (l *allocLog) kept(from, to uint64) (first uint64, es []logEntry) {
	lo := from
	if l.seq > logKeep && l.seq-logKeep > lo {
		lo = l.seq - logKeep
	}
	for i := lo; i < to; i++ {
		es = append(es, l.ring[i%logKeep])
	}
	return lo - from + 1, es
}

// What a collective is about to do.
type action uint8

const (
	actRegister action = 1
	actTrim     action = 2
	actRemove   action = 3
)

func (a action) verb() string {
	return [...]string{"", "register", "release", "deregister"}[a]
}

func (a action) done() string {
	return [...]string{"", "registered", "released", "deregistered"}[a]
}

func (a action) doing() string {
	return [...]string{"", "ending a scope", "trimming", "removing the group"}[a]
}

// storeRecord is a group's record as the pool exchanges it through the
// store (Group.AllGather): what the rank is about to do (act), its
// position (xseq), the segments, the allocation state, and the log range
// since the group's last check (to name the first differing Alloc/Free).
// The in-band agreement carries the fixed-size form (scopeRecord).
type storeRecord struct {
	act   action
	xseq  uint64 // collectives this group has run on this rank
	segs  []Segment
	state allocState // zero where not compared (removing a group)
	logN  uint64     // log entries since the group's last check (to name a difference)
	logH  uint64
}

func (f *storeRecord) encode() []byte {
	b := binary.LittleEndian.AppendUint32(nil, recMagic)
	b = append(b, roundRecord, byte(f.act))
	b = binary.LittleEndian.AppendUint64(b, f.xseq)
	b = binary.LittleEndian.AppendUint64(b, f.logN)
	b = binary.LittleEndian.AppendUint64(b, f.logH)
	b = binary.LittleEndian.AppendUint64(b, uint64(f.state.next))
	b = binary.LittleEndian.AppendUint64(b, f.state.h)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(f.segs)))
	for _, s := range f.segs {
		b = binary.LittleEndian.AppendUint64(b, uint64(s.ID))
		b = binary.LittleEndian.AppendUint64(b, uint64(s.Size))
	}
	return b
}

func decodeStoreRecord(b []byte) (storeRecord, error) {
	var f storeRecord
	if len(b) < 50 || binary.LittleEndian.Uint32(b) != recMagic || b[4] != roundRecord {
		return f, errors.New("not a pool record")
	}
	f.act = action(b[5])
	f.xseq = binary.LittleEndian.Uint64(b[6:])
	f.logN = binary.LittleEndian.Uint64(b[14:])
	f.logH = binary.LittleEndian.Uint64(b[22:])
	f.state.next = SegmentID(binary.LittleEndian.Uint64(b[30:]))
	f.state.h = binary.LittleEndian.Uint64(b[38:])
	n := int(binary.LittleEndian.Uint32(b[46:]))
	b = b[50:]
	if len(b) != 16*n {
		return f, fmt.Errorf("record holds %d bytes for %d segments", len(b), n)
	}
	for i := range n {
		f.segs = append(f.segs, Segment{ID: SegmentID(binary.LittleEndian.Uint64(b[16*i:])), Size: int64(binary.LittleEndian.Uint64(b[16*i+8:]))})
	}
	return f, nil
}

func segList(ss []Segment) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = fmt.Sprintf("%d:%s", s.ID, sizeStr(s.Size))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func sizeStr(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func sameSegs(a, b []Segment) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Size != b[i].Size {
			return false
		}
	}
	return true
}

// verify exchanges rec with the group and returns nil when every rank sent
// the same, or an error wrapping ErrMismatch that names the first differing
// rank. from is the log position of the group's last check. The caller holds
// g.cmu.
func (p *Pool) verify(ctx context.Context, g *group, rec storeRecord, from mark) error {
	p.mu.RLock()
	unsettled := g.unsettled
	p.mu.RUnlock()
	all, err := g.g.AllGather(ctx, rec.encode())
	g.xseq++
	if err != nil {
		return fmt.Errorf("pool: group %q: exchanging records before %s: %w; nothing was done", g.name, rec.act.doing(), err)
	}
	if len(all) != g.size {
		return fmt.Errorf("%w: group %q: exchange returned %d records for %d ranks", ErrMismatch, g.name, len(all), g.size)
	}
	fps := make([]storeRecord, len(all))
	for r, b := range all {
		if fps[r], err = decodeStoreRecord(b); err != nil {
			return fmt.Errorf("%w: group %q: rank %d sent an unreadable record (%v); nothing was done", ErrMismatch, g.name, r, err)
		}
	}
	var why []string
	f0 := fps[0]
	for r := 1; r < len(fps) && len(why) == 0; r++ {
		f := fps[r]
		switch {
		case f.act != f0.act:
			why = append(why, fmt.Sprintf("rank %d is %s but rank 0 is %s", r, f.act.doing(), f0.act.doing()))
		case f.xseq != f0.xseq:
			why = append(why, fmt.Sprintf("rank %d is at collective #%d of this group but rank 0 at #%d (a rank skipped or repeated one)", r, f.xseq+1, f0.xseq+1))
		case !sameSegs(f.segs, f0.segs):
			why = append(why, fmt.Sprintf("rank %d would %s segments %s but rank 0 %s", r, f.act.verb(), segList(f.segs), segList(f0.segs)))
			if f.act != actRemove {
				why = append(why, "the ranks' segments differ, "+forGood)
			}
		}
	}
	// The allocation state decides; the logs since the group's last check
	// only name the first differing call (every rank runs that second round
	// alike: all saw the same records).
	stateDiffers, logDiffers := -1, false
	for r, f := range fps[1:] {
		if f.state != f0.state && stateDiffers < 0 {
			stateDiffers = r + 1
		}
		logDiffers = logDiffers || f.logN != f0.logN || f.logH != f0.logH
	}
	if stateDiffers > 0 {
		f := fps[stateDiffers]
		switch {
		case f.state.next != f0.state.next:
			if len(why) == 0 {
				why = append(why, fmt.Sprintf("rank %d has created %d segments, rank 0 %d, %s", stateDiffers, f.state.next, f0.state.next, forGood))
			}
		case logDiffers && !unsettled:
			why = append(why, p.logDetail(ctx, g, from, rec.logN))
		case logDiffers:
			why = append(why, fmt.Sprintf("rank %d's live allocations still differ from rank 0's after the difference reported before (%s)", stateDiffers, p.blockDetail(ctx, g)))
		default:
			why = append(why, fmt.Sprintf("rank %d's live allocations differ from rank 0's, though their Alloc/Free calls since the group's last check match: a difference reported before was not undone (%s)", stateDiffers, p.blockDetail(ctx, g)))
		}
	}
	if len(why) == 0 {
		return nil
	}
	next := ""
	if rec.act == actRegister && !strings.Contains(why[len(why)-1], forGood) {
		next = " by this scope end (what earlier ones registered stays): free what differs on every rank, and a later Scope.End registers it"
	}
	return fmt.Errorf("%w: group %q, before %s: %s; nothing was %s%s", ErrMismatch, g.name, rec.act.doing(), strings.Join(why, "; "), rec.act.done(), next)
}

// forGood says what to do about segments that differ between ranks.
const forGood = "which no Free undoes (segment ids are never reused, and the ranks cannot agree to release them): close the world and create it again"

// logDetail runs the second round (every rank runs it: all saw the same
// records) and describes the first differing log entry.
func (p *Pool) logDetail(ctx context.Context, g *group, from mark, n uint64) string {
	p.mu.RLock()
	first, es := p.log.kept(from.seq, from.seq+n)
	p.mu.RUnlock()
	b := binary.LittleEndian.AppendUint32(nil, recMagic)
	b = append(b, roundDetail)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint64(b, n)
	b = appendEntries(b, es)
	all, err := g.g.AllGather(ctx, b)
	g.xseq++
	if err != nil || len(all) != g.size {
		return fmt.Sprintf("allocation logs differ (details unavailable: %v)", err)
	}
	type rlog struct {
		first, total uint64
		es           []logEntry
	}
	logs := make([]rlog, len(all))
	for r, b := range all {
		if len(b) < 21 || binary.LittleEndian.Uint32(b) != recMagic || b[4] != roundDetail || (len(b)-21)%entrySz != 0 {
			return fmt.Sprintf("allocation logs differ (rank %d sent unreadable details)", r)
		}
		l := rlog{first: binary.LittleEndian.Uint64(b[5:]), total: binary.LittleEndian.Uint64(b[13:])}
		l.es = decodeEntries(b[21:])
		logs[r] = l
	}
	at := func(l rlog, i uint64) (logEntry, bool) { // 1-based index
		if i < l.first || i-l.first >= uint64(len(l.es)) {
			return logEntry{}, false
		}
		return l.es[i-l.first], true
	}
	lo, hi := uint64(1), ^uint64(0)
	for _, l := range logs {
		lo, hi = max(lo, l.first), min(hi, l.total)
	}
	for i := lo; i <= hi; i++ {
		e0, _ := at(logs[0], i)
		for r := 1; r < len(logs); r++ {
			if e, _ := at(logs[r], i); e != e0 {
				return fmt.Sprintf("allocation log differs at entry %d since the group's last check: rank 0 %v, rank %d %v", i, e0, r, e)
			}
		}
	}
	for r := 1; r < len(logs); r++ {
		if logs[r].total != logs[0].total {
			s := fmt.Sprintf("rank %d made %d Alloc/Free calls since the group's last check but rank 0 made %d", r, logs[r].total, logs[0].total)
			long, idx := r, logs[0].total+1
			if logs[r].total < logs[0].total {
				long, idx = 0, logs[r].total+1
			}
			if e, ok := at(logs[long], idx); ok {
				s += fmt.Sprintf(" (rank %d's entry %d: %v)", long, idx, e)
			}
			return s
		}
	}
	return fmt.Sprintf("allocation logs differ before entry %d since the group's last check (only the last %d entries are kept)", lo, logKeep)
}

// liveEntriesLocked returns up to max live blocks, in (segment, offset)
// order, each as the Alloc that made it, and how many there are.
func (p *Pool) liveEntriesLocked(max int) (es []logEntry, total uint64) {
	for _, s := range p.byID {
		for _, b := range s.blocks {
			if b.state != stateLive {
				continue
			}
			total++
			if len(es) < max {
				es = append(es, logEntry{op: opAlloc, size: b.asked, align: b.align, seg: s.seg.ID, off: b.off})
			}
		}
	}
	return es, total
}

// blockDetail runs the second round where the log cannot name the
// difference (an earlier check found one, and the log since holds the
// Frees that mended part of it): every rank sends its live blocks, and it
// describes the first that differs. Every rank runs it alike.
func (p *Pool) blockDetail(ctx context.Context, g *group) string {
	p.mu.RLock()
	es, total := p.liveEntriesLocked(logKeep)
	p.mu.RUnlock()
	b := binary.LittleEndian.AppendUint32(nil, recMagic)
	b = append(b, roundBlocks)
	b = binary.LittleEndian.AppendUint64(b, total)
	b = appendEntries(b, es)
	all, err := g.g.AllGather(ctx, b)
	g.xseq++
	if err != nil || len(all) != g.size {
		return fmt.Sprintf("live blocks unavailable: %v", err)
	}
	type rblocks struct {
		total uint64
		es    []logEntry
	}
	ranks := make([]rblocks, len(all))
	for r, b := range all {
		if len(b) < 13 || binary.LittleEndian.Uint32(b) != recMagic || b[4] != roundBlocks || (len(b)-13)%entrySz != 0 {
			return fmt.Sprintf("rank %d sent unreadable live blocks", r)
		}
		rb := rblocks{total: binary.LittleEndian.Uint64(b[5:])}
		rb.es = decodeEntries(b[13:])
		ranks[r] = rb
	}
	str := func(rb rblocks, i int) string {
		if i < len(rb.es) {
			return rb.es[i].String()
		}
		return "no more live blocks"
	}
	for r := 1; r < len(ranks); r++ {
		n := min(len(ranks[0].es), len(ranks[r].es))
		for i := 0; i <= n; i++ {
			if i == n {
				if len(ranks[0].es) == len(ranks[r].es) {
					break
				}
			} else if ranks[0].es[i] == ranks[r].es[i] {
				continue
			}
			return fmt.Sprintf("first differing live block: rank 0 %s, rank %d %s", str(ranks[0], i), r, str(ranks[r], i))
		}
		if ranks[r].total != ranks[0].total {
			return fmt.Sprintf("rank %d holds %d live blocks, rank 0 %d; the first %d match", r, ranks[r].total, ranks[0].total, logKeep)
		}
	}
	return fmt.Sprintf("every rank's live blocks match (up to the first %d): the segments differ", logKeep)
}

// appendEntries appends es in their exchange encoding: per entry its op,
// then size, align, segment and offset as little-endian words (entrySz
// bytes).
func appendEntries(b []byte, es []logEntry) []byte {
	for _, e := range es {
		b = append(b, e.op)
		for _, v := range [...]uint64{uint64(e.size), uint64(e.align), uint64(e.seg), uint64(e.off)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b
}

// decodeEntries reads appendEntries' encoding; len(x) is a multiple of
// entrySz (the caller checked).
func decodeEntries(x []byte) []logEntry {
	var es []logEntry
	for ; len(x) > 0; x = x[entrySz:] {
		u := func(i int) uint64 { return binary.LittleEndian.Uint64(x[1+8*i:]) }
		es = append(es, logEntry{op: x[0], size: int64(u(0)), align: int64(u(1)), seg: SegmentID(u(2)), off: int64(u(3))})
	}
	return es
}
