package plan

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
)

// ErrInvalid is wrapped by every error about a bad Spec or a bad Plan.
var ErrInvalid = errors.New("plan: invalid")

// Spec describes one rank's part in a collective call.
type Spec struct {
	Kind    coll.Kind
	N, Rank int
	// Count is in elements: per rank for AllGather (each rank's input) and
	// ReduceScatter (each rank's output); the whole tensor for AllReduce and
	// Broadcast. Any value >= 0; AllReduce need not divide by N.
	Count int64
	DType coll.DType
	Op    coll.ReduceOp // ReduceScatter, AllReduce
	Root  int           // Broadcast
	Options
}

// Options select variants.
type Options struct {
	// InPlace: the plan uses Out only (see the package doc for its layout).
	// AllGather, ReduceScatter and AllReduce.
	InPlace bool
	// Chunks > 1 splits every data step into up to Chunks element-aligned
	// pieces that parallel workers (or copy engines) can run at once.
	Chunks int
	// OneShot (AllReduce only): every rank reduces the whole tensor from all
	// peers' inputs; one barrier less and no gather phase, for small sizes.
	OneShot bool
}

// AllToAll builds rank's plan for equal blocks of count elements: rank
// pulls block rank of every peer's In into the peer's block of its Out.
func AllToAll(n, rank int, count int64, dt coll.DType, o Options) (Plan, error) {
	return Build(Spec{Kind: coll.AllToAll, N: n, Rank: rank, Count: count, DType: dt, Options: o})
}

// AllToAllV builds rank's plan for split counts: counts[i][j] elements go
// from rank i to rank j, each rank's blocks packed in rank order in In (by
// destination) and Out (by source). Unlike the other plans it depends on
// every rank's counts, so the executor builds it once the peers' counts are
// readable, after phase 0; its barriers do not depend on them (phase 1 also
// tells a peer its counts were read). Count is 0.
func AllToAllV(n, rank int, dt coll.DType, counts [][]int64, o Options) (Plan, error) {
	s := Spec{Kind: coll.AllToAll, N: n, Rank: rank, DType: dt, Options: o}
	if err := s.check(); err != nil {
		return Plan{}, err
	}
	if err := checkCounts(n, dt, counts); err != nil {
		return Plan{}, fmt.Errorf("plan: %v n=%d rank=%d: %w", s.Kind, n, rank, err)
	}
	b := &builder{p: Plan{Kind: s.Kind, N: n, Rank: rank, DType: dt, Splits: true}, chunks: max(o.Chunks, 1), es: int64(dt.Size())}
	b.allToAllV(counts)
	if err := Validate(b.p); err != nil {
		return Plan{}, fmt.Errorf("plan: generated an invalid plan (a bug in package plan): %w", err)
	}
	return b.p, nil
}

// Prelude is the phase-0 barrier every plan of AllToAllV (for n > 1)
// starts with: an executor runs it before it reads the peers' counts, then
// the rest of the plan, Steps[len(Prelude(n, rank)):].
func Prelude(n, rank int) []Step {
	b := &builder{p: Plan{N: n, Rank: rank}}
	b.signalAll(0)
	b.waitAll(0)
	return b.p.Steps
}

// checkCounts checks an n×n matrix of element counts: no negative count,
// and no rank's row or column past what a plan can address.
func checkCounts(n int, dt coll.DType, counts [][]int64) error {
	if len(counts) != n {
		return fmt.Errorf("%d rows of counts for %d ranks: %w", len(counts), n, ErrInvalid)
	}
	lim := int64(1<<62) / int64(n) / int64(dt.Size())
	for i, row := range counts {
		if len(row) != n {
			return fmt.Errorf("row %d holds %d counts for %d ranks: %w", i, len(row), n, ErrInvalid)
		}
		for j, c := range row {
			if c < 0 || c > lim {
				return fmt.Errorf("count %d from rank %d to rank %d is out of range [0, %d]: %w", c, i, j, lim, ErrInvalid)
			}
		}
	}
	return nil
}

// Build builds the plan that s describes.
func Build(s Spec) (Plan, error) {
	if err := s.check(); err != nil {
		return Plan{}, err
	}
	es := int64(s.DType.Size())
	b := &builder{p: Plan{Kind: s.Kind, N: s.N, Rank: s.Rank, DType: s.DType, Count: s.Count,
		InPlace: s.InPlace, OneShot: s.OneShot}, chunks: max(s.Chunks, 1), es: es}
	if s.Kind == coll.ReduceScatter || s.Kind == coll.AllReduce {
		b.p.Op = s.Op
	}
	if s.Kind == coll.Broadcast {
		b.p.Root = s.Root
	}
	switch s.Kind {
	case coll.AllGather:
		b.allGather()
	case coll.ReduceScatter:
		b.reduceScatter()
	case coll.AllReduce:
		if s.OneShot {
			b.allReduceOneShot()
		} else {
			b.allReduceTwoShot()
		}
	case coll.Broadcast:
		b.broadcast()
	case coll.AllToAll:
		b.allToAll()
	}
	if err := Validate(b.p); err != nil {
		return Plan{}, fmt.Errorf("plan: generated an invalid plan (a bug in package plan): %w", err)
	}
	return b.p, nil
}

func (s Spec) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("plan: %v n=%d rank=%d: %s: %w", s.Kind, s.N, s.Rank, fmt.Sprintf(format, a...), ErrInvalid)
	}
	switch {
	case s.Kind < coll.AllGather || s.Kind > coll.AllToAll:
		return bad("unknown kind (want all_gather, reduce_scatter, all_reduce, broadcast or all_to_all)")
	case s.N < 1:
		return bad("group size must be at least 1")
	case s.Rank < 0 || s.Rank >= s.N:
		return bad("rank out of range [0, %d)", s.N)
	case s.Count < 0:
		return bad("negative count %d", s.Count)
	case !s.DType.Valid():
		return bad("unknown dtype %v", s.DType)
	case s.Chunks < 0:
		return bad("negative chunk count %d", s.Chunks)
	case s.OneShot && s.Kind != coll.AllReduce:
		return bad("OneShot applies to all_reduce only")
	case s.InPlace && s.Kind == coll.Broadcast:
		return bad("broadcast works in Out only; InPlace does not apply")
	case s.InPlace && s.Kind == coll.AllToAll:
		return bad("all_to_all is out of place only")
	case s.Kind == coll.Broadcast && (s.Root < 0 || s.Root >= s.N):
		return bad("root %d out of range [0, %d)", s.Root, s.N)
	case (s.Kind == coll.ReduceScatter || s.Kind == coll.AllReduce) && (s.Op < coll.Sum || s.Op > coll.Max):
		return bad("unknown reduction %v (want sum, avg, min or max)", s.Op)
	}
	if max := int64(1<<62) / int64(s.N) / int64(s.DType.Size()); s.Count > max {
		return bad("count %d too large", s.Count)
	}
	return nil
}

type builder struct {
	p      Plan
	chunks int
	es     int64 // element size
}

// peers lists the other ranks starting at rank+1, wrapping around.
func (b *builder) peers() []int {
	var out []int
	for i := 1; i < b.p.N; i++ {
		out = append(out, (b.p.Rank+i)%b.p.N)
	}
	return out
}

func (b *builder) signalAll(phase int) {
	for _, q := range b.peers() {
		b.p.Steps = append(b.p.Steps, Step{Op: Signal, Peer: q, Phase: phase})
	}
}

func (b *builder) waitAll(phase int) {
	for _, q := range b.peers() {
		b.p.Steps = append(b.p.Steps, Step{Op: Wait, Peer: q, Phase: phase})
	}
}

// data appends a Copy (one source) or Reduce step of n bytes, split into up
// to b.chunks element-aligned pieces. Empty steps are dropped.
func (b *builder) data(op Op, srcs []Ref, dst Ref, n int64) {
	elems := n / b.es
	pieces := min(int64(b.chunks), elems)
	var off int64
	for i := int64(0); i < pieces; i++ {
		m := elems / pieces
		if i < elems%pieces {
			m++
		}
		s := make([]Ref, len(srcs))
		for j, r := range srcs {
			s[j] = Ref{Buf: r.Buf, Rank: r.Rank, Off: r.Off + off}
		}
		b.p.Steps = append(b.p.Steps, Step{Op: op, Srcs: s, Dst: Ref{Buf: dst.Buf, Rank: dst.Rank, Off: dst.Off + off}, Bytes: m * b.es})
		off += m * b.es
	}
}

// allRanks returns buf of every rank at off, ascending ranks.
func (b *builder) allRanks(buf Buf, off int64) []Ref {
	out := make([]Ref, b.p.N)
	for q := range out {
		out[q] = Ref{Buf: buf, Rank: q, Off: off}
	}
	return out
}

// input is the buffer holding inputs: In, or Out for in-place plans.
func (b *builder) input() Buf {
	if b.p.InPlace {
		return Out
	}
	return In
}

func (b *builder) allGather() {
	p, r := &b.p, b.p.Rank
	c := p.Count * b.es
	p.Phases, p.OutBytes = 2, int64(p.N)*c
	if !p.InPlace {
		p.InBytes = c
	}
	if c == 0 {
		return
	}
	// The own copy joins the peers' copies in one stage after the wait:
	// one hand-off to the executor's workers instead of two, and the
	// stage is cut over all of them (ranks enter back-to-back calls
	// together, so the wait rarely has anything to hide).
	b.signalAll(0)
	b.waitAll(0)
	if !p.InPlace {
		b.data(Copy, []Ref{{In, r, 0}}, Ref{Out, r, int64(r) * c}, c)
	}
	for _, q := range b.peers() {
		src := Ref{In, q, 0}
		if p.InPlace {
			src = Ref{Out, q, int64(q) * c}
		}
		b.data(Copy, []Ref{src}, Ref{Out, r, int64(q) * c}, c)
	}
	b.signalAll(1)
	b.waitAll(1)
}

func (b *builder) reduceScatter() {
	p, r := &b.p, b.p.Rank
	c := p.Count * b.es
	p.Phases = 2
	dst := Ref{Out, r, 0}
	if p.InPlace {
		p.OutBytes = int64(p.N) * c
		dst.Off = int64(r) * c
	} else {
		p.InBytes, p.OutBytes = int64(p.N)*c, c
	}
	if c == 0 {
		return
	}
	b.signalAll(0)
	b.waitAll(0)
	b.data(Reduce, b.allRanks(b.input(), int64(r)*c), dst, c)
	b.signalAll(1)
	b.waitAll(1)
}

// slice returns the byte range of rank q's share of a two-shot all-reduce:
// count split into N parts, the first count%N one element longer.
func (b *builder) slice(q int) (off, n int64) {
	n64 := int64(b.p.N)
	base, rem := b.p.Count/n64, b.p.Count%n64
	lo := int64(q)*base + min(int64(q), rem)
	m := base
	if int64(q) < rem {
		m++
	}
	return lo * b.es, m * b.es
}

func (b *builder) allReduceTwoShot() {
	p, r := &b.p, b.p.Rank
	total := p.Count * b.es
	p.Phases, p.OutBytes = 3, total
	if !p.InPlace {
		p.InBytes = total
	}
	if total == 0 || p.InPlace && p.N == 1 { // one rank in place: the input is the sum
		return
	}
	b.signalAll(0)
	b.waitAll(0)
	off, n := b.slice(r)
	b.data(Reduce, b.allRanks(b.input(), off), Ref{Out, r, off}, n)
	b.signalAll(1)
	b.waitAll(1)
	for _, q := range b.peers() {
		off, n := b.slice(q)
		b.data(Copy, []Ref{{Out, q, off}}, Ref{Out, r, off}, n)
	}
	b.signalAll(2)
	b.waitAll(2)
}

func (b *builder) allReduceOneShot() {
	p, r := &b.p, b.p.Rank
	total := p.Count * b.es
	p.Phases, p.OutBytes = 2, total
	dst := Ref{Out, r, 0}
	if p.InPlace {
		// Writing Out while peers still read it would corrupt their inputs:
		// reduce into private scratch, copy after the last barrier.
		p.ScratchBytes = total
		dst = Ref{Scratch, r, 0}
	} else {
		p.InBytes = total
	}
	if total == 0 || p.InPlace && p.N == 1 { // one rank in place: the input is the sum
		return
	}
	b.signalAll(0)
	b.waitAll(0)
	b.data(Reduce, b.allRanks(b.input(), 0), dst, total)
	b.signalAll(1)
	b.waitAll(1)
	if p.InPlace {
		b.data(Copy, []Ref{dst}, Ref{Out, r, 0}, total)
	}
}

func (b *builder) broadcast() {
	p, r, root := &b.p, b.p.Rank, b.p.Root
	total := p.Count * b.es
	p.Phases, p.OutBytes = 2, total
	if total == 0 || p.N == 1 {
		return
	}
	if r == root {
		b.signalAll(0)
		b.waitAll(1)
		return
	}
	p.Steps = append(p.Steps, Step{Op: Wait, Peer: root, Phase: 0})
	b.data(Copy, []Ref{{Out, root, 0}}, Ref{Out, r, 0}, total)
	p.Steps = append(p.Steps, Step{Op: Signal, Peer: root, Phase: 1})
}

func (b *builder) allToAll() {
	p, r := &b.p, b.p.Rank
	c := p.Count * b.es
	p.Phases, p.InBytes, p.OutBytes = 2, int64(p.N)*c, int64(p.N)*c
	if c == 0 {
		return
	}
	b.signalAll(0)
	b.waitAll(0)
	b.data(Copy, []Ref{{In, r, int64(r) * c}}, Ref{Out, r, int64(r) * c}, c)
	for _, q := range b.peers() {
		b.data(Copy, []Ref{{In, q, int64(r) * c}}, Ref{Out, r, int64(q) * c}, c)
	}
	b.signalAll(1)
	b.waitAll(1)
}

// allToAllV is allToAll with counts[i][j] elements from i to j: rank r
// pulls counts[q][r] from q's In at q's offset for r (the sum of q's
// counts to the ranks before r) into its Out at q's offset (the sum of the
// counts to r from the ranks before q). Both barriers stay when nothing
// moves: the counts are read between them.
func (b *builder) allToAllV(counts [][]int64) {
	p, r := &b.p, b.p.Rank
	p.Phases = 2
	recvOff := make([]int64, p.N) // element offset in r's Out of the block from each rank
	for q := range p.N {
		p.InBytes += counts[r][q] * b.es
		recvOff[q] = p.OutBytes / b.es
		p.OutBytes += counts[q][r] * b.es
	}
	if p.N == 1 {
		if c := counts[r][r] * b.es; c > 0 {
			b.data(Copy, []Ref{{In, r, 0}}, Ref{Out, r, 0}, c)
		}
		return
	}
	sendOff := func(q int) int64 { // element offset in q's In of its block for r
		var o int64
		for j := range r {
			o += counts[q][j]
		}
		return o
	}
	b.signalAll(0)
	b.waitAll(0)
	for _, q := range append([]int{r}, b.peers()...) {
		if c := counts[q][r] * b.es; c > 0 {
			b.data(Copy, []Ref{{In, q, sendOff(q) * b.es}}, Ref{Out, r, recvOff[q] * b.es}, c)
		}
	}
	b.signalAll(1)
	b.waitAll(1)
}
