package hier

import (
	"fmt"

	"github.com/symmem/symmem/coll"
)

// Mem is one rank's memory in a simulation: In and Out are spans of Arena
// (InOff, OutOff; they may overlap, as an in-place call's do), Scratch its
// own.
type Mem struct {
	Arena         []byte
	InOff, OutOff int64
	InLen, OutLen int64
	Scratch       []byte
}

// Sum adds srcs element by element into dst (dst = srcs[0] + srcs[1] +
// ..., in that order): the element type's arithmetic.
type Sum func(dst []byte, srcs [][]byte)

// Simulate runs every rank's schedule (scheds[r] for group rank r) on mem,
// step by step, each collective step on its child groups together, and
// reports the first schedule error: members of a child group that take
// different steps, a step outside its buffer, or a collective whose input
// and output overlap other than in place.
func Simulate(l *Layout, scheds [][]Step, mem []*Mem, sum Sum) error {
	n := len(l.Host)
	if len(scheds) != n || len(mem) != n {
		return fmt.Errorf("hier: %d schedules and %d memories for %d ranks", len(scheds), len(mem), n)
	}
	for r := 1; r < n; r++ {
		if len(scheds[r]) != len(scheds[0]) {
			return fmt.Errorf("hier: rank %d has %d steps, rank 0 %d", r, len(scheds[r]), len(scheds[0]))
		}
	}
	for k := range scheds[0] {
		for r := range scheds {
			if st := scheds[r][k]; st.Kind != scheds[0][k].Kind || st.Bytes != scheds[0][k].Bytes {
				return fmt.Errorf("hier: step %d: rank %d takes %v, rank 0 %v", k, r, st, scheds[0][k])
			}
		}
		var groups [][]int // the child groups the step runs on, members in their order
		switch kind := scheds[0][k].Kind; {
		case kind == Copy:
			for r := range scheds {
				if err := copyStep(mem[r], scheds[r][k]); err != nil {
					return fmt.Errorf("hier: step %d, rank %d (%v): %w", k, r, scheds[r][k], err)
				}
			}
			continue
		case kind.Cross():
			for i := 0; i < l.Local(); i++ {
				groups = append(groups, l.Cross(i))
			}
		default:
			groups = l.hosts
		}
		for _, members := range groups {
			if err := collStep(members, scheds, k, mem, sum); err != nil {
				return fmt.Errorf("hier: step %d (%v) on ranks %v: %w", k, scheds[members[0]][k].Kind, members, err)
			}
		}
	}
	return nil
}

// span is ref's bytes of m, n long, and its position: the arena's offset,
// or -1 for scratch (which nothing else aliases).
func span(m *Mem, ref Ref, n int64) ([]byte, int64, error) {
	var b []byte
	base := int64(-1)
	switch ref.Buf {
	case In:
		b, base = m.Arena[m.InOff:m.InOff+m.InLen], m.InOff
	case Out:
		b, base = m.Arena[m.OutOff:m.OutOff+m.OutLen], m.OutOff
	case Scratch:
		b = m.Scratch
	}
	if ref.Off < 0 || n < 0 || ref.Off+n > int64(len(b)) {
		return nil, 0, fmt.Errorf("%v, %d bytes, is outside %v's %d bytes", ref, n, ref.Buf, len(b))
	}
	if base >= 0 {
		base += ref.Off
	}
	return b[ref.Off : ref.Off+n], base, nil
}

func copyStep(m *Mem, st Step) error {
	src, sp, err := span(m, st.In, st.Bytes)
	if err != nil {
		return err
	}
	dst, dp, err := span(m, st.Out, st.Bytes)
	if err != nil {
		return err
	}
	if sp >= 0 && dp >= 0 && sp != dp && sp < dp+st.Bytes && dp < sp+st.Bytes {
		return fmt.Errorf("copy's source and destination overlap")
	}
	copy(dst, src)
	return nil
}

// collStep runs step k of members (a child group, in its rank order) as the
// collective of its kind: every member's input is read before any output
// is written, which is what the collective promises for disjoint or
// exactly in-place buffers, and those are the only overlaps allowed.
func collStep(members []int, scheds [][]Step, k int, mem []*Mem, sum Sum) error {
	kind, _ := scheds[members[0]][k].Kind.Coll()
	s := scheds[members[0]][k].Bytes
	m := int64(len(members))
	inLen, outLen := s, s
	switch kind {
	case coll.AllGather:
		outLen = m * s
	case coll.ReduceScatter:
		inLen = m * s
	}
	ins := make([][]byte, len(members))
	outs := make([][]byte, len(members))
	for j, r := range members {
		st := scheds[r][k]
		in, ip, err := span(mem[r], st.In, inLen)
		if err != nil {
			return fmt.Errorf("rank %d's input: %w", r, err)
		}
		out, op, err := span(mem[r], st.Out, outLen)
		if err != nil {
			return fmt.Errorf("rank %d's output: %w", r, err)
		}
		if ip >= 0 && op >= 0 && ip < op+outLen && op < ip+inLen {
			inPlace := map[coll.Kind]bool{
				coll.AllGather:     ip == op+int64(j)*s,
				coll.ReduceScatter: op == ip+int64(j)*s,
				coll.AllReduce:     ip == op,
			}[kind]
			if !inPlace {
				return fmt.Errorf("rank %d's input (%v) and output (%v) overlap, not in place", r, st.In, st.Out)
			}
		}
		ins[j], outs[j] = append([]byte(nil), in...), out
	}
	switch kind {
	case coll.AllGather:
		for _, out := range outs {
			for j, in := range ins {
				copy(out[int64(j)*s:], in)
			}
		}
	case coll.ReduceScatter:
		for j, out := range outs {
			parts := make([][]byte, len(ins))
			for q, in := range ins {
				parts[q] = in[int64(j)*s : int64(j+1)*s]
			}
			sum(out, parts)
		}
	case coll.AllReduce:
		total := make([]byte, s)
		sum(total, ins)
		for _, out := range outs {
			copy(out, total)
		}
	}
	return nil
}
