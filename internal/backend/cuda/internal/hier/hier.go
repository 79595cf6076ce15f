// Package hier is the schedule of the hierarchical collectives for a GPU
// group whose ranks sit on several hosts (issue 27; docs/multihost.md):
// symmem's intra-host paths inside each host (copy engines pulling through
// peer maps, the reduction kernel), NCCL between hosts, on one
// communicator per local index (the ranks of every host with the same
// local rank). It builds the steps of one rank for one call and checks
// layouts; Simulate runs a whole group's schedules on host memory. Pure Go:
// the CUDA backend executes the steps (not yet: the schedules come first,
// tested without GPUs).
//
// # Buffers
//
// A rank sees In and Out (the call's buffers, symmetric: peers on its host
// read them through peer maps) and Scratch (its own, never read by peers).
// Sizes with S bytes per rank's chunk, n ranks, H hosts of L ranks:
//
//	AllGather      In S      Out n*S
//	ReduceScatter  In n*S    Out S      Scratch H*S
//	AllReduce      In T      Out T      (T = the tensor; L pieces)
//
// # Steps
//
//	Copy      own Dst = own Src (Bytes)
//	Pull      own Dst = host peer Peer's Src (Bytes): copy engines
//	Reduce    own Dst = the sum over every rank of this host, in local
//	          order, of its Src (Bytes): the reduction kernel
//	Exchange  grouped NCCL sends and receives with the other hosts' ranks
//	          of this rank's local index (Sends, Recvs)
//	CrossRS   NCCL reduce-scatter on the local index's communicator: Src
//	          (H chunks of Bytes, in host order) into Dst (Bytes)
//	CrossAR   NCCL all-reduce on that communicator, Dst in place (Bytes)
//	Barrier   every rank of this host reached this step, its earlier
//	          writes visible (a signal round on the pad)
//
// The steps between two Barriers form a stage: within one, a rank never
// reads bytes of a host peer that the peer writes in the same stage
// (Simulate checks it). The NCCL steps synchronise only their
// communicator's ranks.
package hier

import (
	"fmt"

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
	Pull
	Reduce
	Exchange
	CrossRS
	CrossAR
	Barrier
)

func (k Kind) String() string {
	return [...]string{"copy", "pull", "reduce", "exchange", "cross-rs", "cross-ar", "barrier"}[k]
}

// Xfer is one NCCL send or receive of an Exchange: Bytes at Ref, to or
// from group rank Peer.
type Xfer struct {
	Peer  int
	At    Ref
	Bytes int64
}

// Step is one step of a rank's schedule (the fields its Kind uses).
type Step struct {
	Kind         Kind
	Dst, Src     Ref
	Bytes        int64
	Peer         int // Pull: the group rank read from
	Sends, Recvs []Xfer
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

// Cross are the group ranks with local index i, in host order: the ranks
// of one cross-host communicator.
func (l *Layout) Cross(i int) []int {
	out := make([]int, len(l.hosts))
	for h, rs := range l.hosts {
		out[h] = rs[i]
	}
	return out
}

// Build is rank r's schedule for a call of kind moving chunk bytes per
// rank (all-gather's input, reduce-scatter's output) or, for an
// all-reduce, a tensor of chunk bytes; unit is the element size (an
// all-reduce's pieces are whole elements). inPlace: In and Out are one
// buffer (Out; all-gather: rank r's slice is its input, reduce-scatter:
// Out is the whole input and the result lands in rank r's slice).
func (l *Layout) Build(kind coll.Kind, r int, chunk, unit int64, inPlace bool) ([]Step, error) {
	if r < 0 || r >= len(l.Host) {
		return nil, fmt.Errorf("hier: rank %d is not in 0..%d", r, len(l.Host)-1)
	}
	if chunk <= 0 || unit <= 0 || chunk%unit != 0 {
		return nil, fmt.Errorf("hier: %d bytes is not a positive number of %d-byte elements", chunk, unit)
	}
	switch kind {
	case coll.AllGather:
		return l.allGather(r, chunk, inPlace), nil
	case coll.ReduceScatter:
		return l.reduceScatter(r, chunk, inPlace), nil
	case coll.AllReduce:
		return l.allReduce(r, chunk, unit), nil
	}
	return nil, fmt.Errorf("hier: %v has no hierarchical schedule", kind)
}

// allGather: each rank exchanges its input with the other hosts' ranks of
// its local index (into their slots of Out), then pulls its host peers'
// slots: the slices of every rank of their local index.
func (l *Layout) allGather(r int, s int64, inPlace bool) []Step {
	mine := Ref{Out, int64(r) * s}
	src := Ref{In, 0}
	if inPlace {
		src = mine
	}
	var steps []Step
	if !inPlace {
		steps = append(steps, Step{Kind: Copy, Dst: mine, Src: src, Bytes: s})
	}
	ex := Step{Kind: Exchange}
	for _, c := range l.Cross(l.local[r]) {
		if c != r {
			ex.Sends = append(ex.Sends, Xfer{Peer: c, At: src, Bytes: s})
			ex.Recvs = append(ex.Recvs, Xfer{Peer: c, At: Ref{Out, int64(c) * s}, Bytes: s})
		}
	}
	if len(ex.Sends) > 0 {
		steps = append(steps, ex)
	}
	steps = append(steps, Step{Kind: Barrier})
	for _, p := range l.hosts[l.Host[r]] {
		if p == r {
			continue
		}
		for _, c := range l.Cross(l.local[p]) {
			at := Ref{Out, int64(c) * s}
			steps = append(steps, Step{Kind: Pull, Dst: at, Src: at, Bytes: s, Peer: p})
		}
	}
	return append(steps, Step{Kind: Barrier})
}

// reduceScatter: each rank sums, over its host's ranks, the chunks meant
// for its local index's communicator (into Scratch, in host order), then
// NCCL reduce-scatters them across hosts into its output.
func (l *Layout) reduceScatter(r int, s int64, inPlace bool) []Step {
	in, dst := In, Ref{Out, 0}
	if inPlace {
		in, dst = Out, Ref{Out, int64(r) * s}
	}
	steps := []Step{{Kind: Barrier}}
	for j, c := range l.Cross(l.local[r]) {
		steps = append(steps, Step{Kind: Reduce, Dst: Ref{Scratch, int64(j) * s}, Src: Ref{in, int64(c) * s}, Bytes: s})
	}
	steps = append(steps, Step{Kind: Barrier})
	if l.Hosts() == 1 {
		return append(steps, Step{Kind: Copy, Dst: dst, Src: Ref{Scratch, 0}, Bytes: s})
	}
	return append(steps, Step{Kind: CrossRS, Dst: dst, Src: Ref{Scratch, 0}, Bytes: s})
}

// allReduce: the tensor in L pieces of whole elements; each rank sums
// piece (its local index) over its host into Out, all-reduces it across
// hosts in place, then pulls its host peers' pieces.
func (l *Layout) allReduce(r int, t, unit int64) []Step {
	n := int64(l.Local())
	piece := (t/unit + n - 1) / n * unit
	at := func(i int) (int64, int64) {
		lo := min(int64(i)*piece, t)
		return lo, min(lo+piece, t) - lo
	}
	me := l.local[r]
	lo, size := at(me)
	steps := []Step{{Kind: Barrier}}
	if size > 0 {
		steps = append(steps, Step{Kind: Reduce, Dst: Ref{Out, lo}, Src: Ref{In, lo}, Bytes: size})
	}
	if l.Hosts() > 1 && size > 0 {
		steps = append(steps, Step{Kind: CrossAR, Dst: Ref{Out, lo}, Bytes: size})
	}
	steps = append(steps, Step{Kind: Barrier})
	for i, p := range l.hosts[l.Host[r]] {
		if p == r {
			continue
		}
		if lo, size := at(i); size > 0 {
			steps = append(steps, Step{Kind: Pull, Dst: Ref{Out, lo}, Src: Ref{Out, lo}, Bytes: size, Peer: p})
		}
	}
	return append(steps, Step{Kind: Barrier})
}
