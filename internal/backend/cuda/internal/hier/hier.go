// Package hier is the schedule of the hierarchical collectives for a GPU
// group whose ranks sit on several hosts (issue 27; docs/multihost.md):
// collectives on two kinds of child groups, the ranks of one host (where
// symmem's intra-host paths serve: copy engines, kernels) and the ranks of
// one local index across hosts (NCCL), plus local copies. It builds the
// steps of one rank for one call; Simulate runs a whole group's schedules
// on host memory. Pure Go: the CUDA backend executes the steps.
//
// The hosts' ranks must be consecutive in the group (blocked: rank
// h*L + i is local index i of the h-th host block), as torchrun and
// `symmem launch --hosts` number them: then a host's slices of an
// all-gather's output are one span, and each step is a plain collective.
//
// # Buffers
//
// A rank sees In and Out (the call's buffers) and Scratch (its own, H*S
// bytes for all-gather and reduce-scatter, none for all-reduce). S is the
// bytes of one rank's chunk, n = H*L ranks:
//
//	AllGather      In S      Out n*S
//	ReduceScatter  In n*S    Out S
//	AllReduce      In T      Out T      (T = the tensor; L pieces)
//
// # Steps
//
// Every rank of a child group takes the same collective steps in the same
// order (Simulate checks it); Bytes is what the collective calls them (an
// all-gather's input, a reduce-scatter's output, an all-reduce's tensor):
//
//	HostAG, CrossAG  all-gather In into Out on the host's / local index's ranks
//	HostRS, CrossRS  reduce-scatter In into Out
//	CrossAR          all-reduce In into Out
//	Copy             Out = In, this rank alone
//
// In and Out of a collective step are disjoint or in place exactly as the
// collective defines it (Simulate checks that too).
package hier

import (
	"fmt"
	"slices"

	"github.com/symmem/symmem/coll"
)

// Buf names a rank's buffer.
type Buf uint8

const (
	In Buf = iota
	Out
	Scratch
)

func (b Buf) String() string { return [...]string{"in", "out", "scratch"}[b] }

// Ref is byte Off of a buffer.
type Ref struct {
	Buf Buf
	Off int64
}

func (r Ref) String() string { return fmt.Sprintf("%s+%d", r.Buf, r.Off) }

// Kind is a step's kind.
type Kind uint8

const (
	Copy Kind = iota
	HostAG
	HostRS
	CrossAG
	CrossRS
	CrossAR
)

func (k Kind) String() string {
	return [...]string{"copy", "host-ag", "host-rs", "cross-ag", "cross-rs", "cross-ar"}[k]
}

// Cross says whether k runs on the local index's ranks across hosts.
func (k Kind) Cross() bool { return k >= CrossAG }

// Coll is the collective k runs (Copy: none).
func (k Kind) Coll() (coll.Kind, bool) {
	switch k {
	case HostAG, CrossAG:
		return coll.AllGather, true
	case HostRS, CrossRS:
		return coll.ReduceScatter, true
	case CrossAR:
		return coll.AllReduce, true
	}
	return 0, false
}

// Step is one step of a rank's schedule.
type Step struct {
	Kind    Kind
	In, Out Ref
	Bytes   int64
}

func (s Step) String() string {
	return fmt.Sprintf("%v %v -> %v (%d bytes)", s.Kind, s.In, s.Out, s.Bytes)
}

// Layout is the group's ranks on hosts: Host[r] is the host of group rank
// r (0..H-1, any order). Every host holds the same number of ranks.
type Layout struct {
	Host []int

	hosts [][]int // the group ranks of each host, ascending
	local []int   // each rank's index among its host's ranks
}

// NewLayout checks host and indexes it.
func NewLayout(host []int) (*Layout, error) {
	if len(host) == 0 {
		return nil, fmt.Errorf("hier: a layout needs ranks")
	}
	l := &Layout{Host: append([]int(nil), host...), local: make([]int, len(host))}
	for r, h := range host {
		if h < 0 || h >= len(host) {
			return nil, fmt.Errorf("hier: rank %d: host %d is not in 0..%d", r, h, len(host)-1)
		}
		for len(l.hosts) <= h {
			l.hosts = append(l.hosts, nil)
		}
		l.local[r] = len(l.hosts[h])
		l.hosts[h] = append(l.hosts[h], r)
	}
	for h, rs := range l.hosts {
		if len(rs) == 0 {
			return nil, fmt.Errorf("hier: host %d has no rank (hosts are numbered 0..%d without gaps)", h, len(l.hosts)-1)
		}
		if len(rs) != len(l.hosts[0]) {
			return nil, fmt.Errorf("hier: host %d has %d ranks, host 0 has %d: the hierarchical schedules need as many ranks on every host (NCCL alone serves the others)",
				h, len(rs), len(l.hosts[0]))
		}
	}
	return l, nil
}

// Hosts is H, Local L (ranks per host).
func (l *Layout) Hosts() int { return len(l.hosts) }
func (l *Layout) Local() int { return len(l.hosts[0]) }

// HostRanks are the group ranks of host h, ascending.
func (l *Layout) HostRanks(h int) []int { return l.hosts[h] }

// LocalIndex is rank r's index among its host's ranks.
func (l *Layout) LocalIndex(r int) int { return l.local[r] }

// Cross are the group ranks with local index i, ascending (a child
// group's order): the ranks of one cross-host group.
func (l *Layout) Cross(i int) []int {
	out := make([]int, 0, len(l.hosts))
	for _, h := range l.order() {
		out = append(out, l.hosts[h][i])
	}
	return out
}

// order is the hosts in the order of their first ranks (a cross group's
// member order when the layout is blocked).
func (l *Layout) order() []int {
	hs := make([]int, len(l.hosts))
	for h := range hs {
		hs[h] = h
	}
	slices.SortFunc(hs, func(a, b int) int { return l.hosts[a][0] - l.hosts[b][0] })
	return hs
}

// Blocked says whether every host's ranks are consecutive in the group
// (the schedules need it).
func (l *Layout) Blocked() bool {
	for _, rs := range l.hosts {
		if rs[len(rs)-1]-rs[0] != len(rs)-1 {
			return false
		}
	}
	return true
}

// ScratchBytes is the scratch a call of kind moving chunk bytes per rank
// needs on every rank.
func (l *Layout) ScratchBytes(kind coll.Kind, chunk int64) int64 {
	if kind == coll.AllReduce {
		return 0
	}
	return int64(l.Hosts()) * chunk
}

// Build is rank r's schedule for a call of kind moving chunk bytes per
// rank (all-gather's input, reduce-scatter's output) or, for an
// all-reduce, a tensor of chunk bytes, which must split into L pieces of
// whole unit-byte elements. inPlace: In and Out are one buffer as the
// collective defines it (all-gather: In is rank r's slice of Out;
// reduce-scatter: Out is rank r's slice of In; all-reduce: In is Out).
func (l *Layout) Build(kind coll.Kind, r int, chunk, unit int64, inPlace bool) ([]Step, error) {
	if r < 0 || r >= len(l.Host) {
		return nil, fmt.Errorf("hier: rank %d is not in 0..%d", r, len(l.Host)-1)
	}
	if !l.Blocked() {
		return nil, fmt.Errorf("hier: the hosts' ranks are not consecutive in the group (hosts %v)", l.Host)
	}
	if chunk <= 0 || unit <= 0 || chunk%unit != 0 {
		return nil, fmt.Errorf("hier: %d bytes is not a positive number of %d-byte elements", chunk, unit)
	}
	switch kind {
	case coll.AllGather:
		return l.allGather(r, chunk), nil
	case coll.ReduceScatter:
		return l.reduceScatter(r, chunk, inPlace), nil
	case coll.AllReduce:
		if L := int64(l.Local()); chunk%(L*unit) != 0 {
			return nil, fmt.Errorf("hier: an all-reduce of %d bytes does not split into %d pieces of whole %d-byte elements", chunk, L, unit)
		}
		return l.allReduce(r, chunk), nil
	}
	return nil, fmt.Errorf("hier: %v has no hierarchical schedule", kind)
}

// block is the byte offset of host h's block of a buffer of chunk bytes
// per rank.
func (l *Layout) block(h int, chunk int64) int64 { return int64(l.hosts[h][0]) * chunk }

// allGather: the ranks of this rank's local index gather their inputs
// across hosts into Scratch (in group order), each copied to its slot of Out;
// then each host block of Out is all-gathered in place on this host (the
// slot of local index j is j's, which it now holds).
func (l *Layout) allGather(r int, s int64) []Step {
	i := l.local[r]
	steps := []Step{{Kind: CrossAG, In: Ref{In, 0}, Out: Ref{Scratch, 0}, Bytes: s}}
	for b, h := range l.order() {
		steps = append(steps, Step{Kind: Copy, In: Ref{Scratch, int64(b) * s}, Out: Ref{Out, l.block(h, s) + int64(i)*s}, Bytes: s})
	}
	for _, h := range l.order() {
		at := Ref{Out, l.block(h, s)}
		steps = append(steps, Step{Kind: HostAG, In: Ref{Out, at.Off + int64(i)*s}, Out: at, Bytes: s})
	}
	return steps
}

// reduceScatter: each host block of In is reduce-scattered on this host
// into Scratch (in group order: the host's sum of the chunk of local index i
// of every host), then those are reduce-scattered across hosts into Out.
func (l *Layout) reduceScatter(r int, s int64, inPlace bool) []Step {
	var steps []Step
	for b, h := range l.order() {
		steps = append(steps, Step{Kind: HostRS, In: Ref{In, l.block(h, s)}, Out: Ref{Scratch, int64(b) * s}, Bytes: s})
	}
	out := Ref{Out, 0}
	if inPlace {
		out = Ref{In, int64(r) * s}
	}
	return append(steps, Step{Kind: CrossRS, In: Ref{Scratch, 0}, Out: out, Bytes: s})
}

// allReduce: the tensor in L pieces; each rank reduce-scatters it on its
// host (piece i into its place in Out), all-reduces piece i across hosts
// in place, and all-gathers the pieces on its host in place.
func (l *Layout) allReduce(r int, t int64) []Step {
	p := t / int64(l.Local())
	mine := Ref{Out, int64(l.local[r]) * p}
	return []Step{
		{Kind: HostRS, In: Ref{In, 0}, Out: mine, Bytes: p},
		{Kind: CrossAR, In: mine, Out: mine, Bytes: p},
		{Kind: HostAG, In: mine, Out: Ref{Out, 0}, Bytes: p},
	}
}
