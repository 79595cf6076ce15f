package hier

import "fmt"

// Mem is one rank's buffers in a simulation. Aliased: In is Out (an
// in-place call); In is then ignored.
type Mem struct {
	In, Out, Scratch []byte
	Aliased          bool
}

// Sum adds srcs element by element into dst (dst = srcs[0] + srcs[1] +
// ..., in that order): the element type's arithmetic.
type Sum func(dst []byte, srcs [][]byte)

// Simulate runs every rank's schedule (scheds[r] for group rank r) on mem,
// stage by stage (the steps between Barriers), the NCCL steps of a
// communicator together, and reports the first schedule error: a step
// outside its buffer, ranks of one host with different stage counts, an
// NCCL step its communicator's ranks do not all take at the same place,
// unmatched sends and receives, or a rank reading bytes that a host peer
// writes in the same stage (a missing Barrier).
func Simulate(l *Layout, scheds [][]Step, mem []*Mem, sum Sum) error {
	n := len(l.Host)
	if len(scheds) != n || len(mem) != n {
		return fmt.Errorf("hier: %d schedules and %d memories for %d ranks", len(scheds), len(mem), n)
	}
	stages := make([][][]Step, n)
	for r, s := range scheds {
		stages[r] = split(s)
		if q := l.hosts[l.Host[r]][0]; len(stages[r]) != len(stages[q]) && q < r {
			return fmt.Errorf("hier: rank %d has %d stages, rank %d of its host %d", r, len(stages[r]), q, len(stages[q]))
		}
	}
	depth := 0
	for _, st := range stages {
		depth = max(depth, len(st))
	}
	for k := 0; k < depth; k++ {
		if err := raceFree(l, stages, mem, k); err != nil {
			return err
		}
		width := 0
		for r := range stages {
			if k < len(stages[r]) {
				width = max(width, len(stages[r][k]))
			}
		}
		for p := 0; p < width; p++ {
			for r := range stages {
				if k < len(stages[r]) && p < len(stages[r][k]) {
					st := stages[r][k][p]
					if err := dataStep(l, r, st, mem, sum); err != nil {
						return fmt.Errorf("hier: rank %d stage %d step %d (%v): %w", r, k, p, st.Kind, err)
					}
				}
			}
			if err := ncclSteps(l, stages, k, p, mem, sum); err != nil {
				return fmt.Errorf("hier: stage %d step %d: %w", k, p, err)
			}
		}
	}
	return nil
}

// split cuts s at its Barriers.
func split(s []Step) [][]Step {
	out := [][]Step{nil}
	for _, st := range s {
		if st.Kind == Barrier {
			out = append(out, nil)
			continue
		}
		out[len(out)-1] = append(out[len(out)-1], st)
	}
	return out
}

// buf is rank r's bytes of ref, Bytes long.
func buf(m *Mem, ref Ref, bytes int64) ([]byte, error) {
	var b []byte
	switch ref.Buf {
	case In:
		b = m.In
		if m.Aliased {
			b = m.Out
		}
	case Out:
		b = m.Out
	case Scratch:
		b = m.Scratch
	}
	if ref.Off < 0 || bytes < 0 || ref.Off+bytes > int64(len(b)) {
		return nil, fmt.Errorf("%v..+%d outside the %d-byte %v", ref, bytes, len(b), ref.Buf)
	}
	return b[ref.Off : ref.Off+bytes], nil
}

// dataStep runs one of rank r's steps that moves data within its host.
func dataStep(l *Layout, r int, st Step, mem []*Mem, sum Sum) error {
	switch st.Kind {
	case Copy, Pull:
		from := r
		if st.Kind == Pull {
			from = st.Peer
			if from < 0 || from >= len(l.Host) || l.Host[from] != l.Host[r] || from == r {
				return fmt.Errorf("pull from rank %d, not a peer on host %d", from, l.Host[r])
			}
		}
		src, err := buf(mem[from], st.Src, st.Bytes)
		if err != nil {
			return err
		}
		dst, err := buf(mem[r], st.Dst, st.Bytes)
		if err != nil {
			return err
		}
		copy(dst, src)
	case Reduce:
		var srcs [][]byte
		for _, p := range l.hosts[l.Host[r]] {
			b, err := buf(mem[p], st.Src, st.Bytes)
			if err != nil {
				return err
			}
			srcs = append(srcs, append([]byte(nil), b...))
		}
		dst, err := buf(mem[r], st.Dst, st.Bytes)
		if err != nil {
			return err
		}
		sum(dst, srcs)
	}
	return nil
}

// ncclSteps runs the NCCL steps at place (stage k, step p): each
// communicator's ranks must all be there with the same kind and size.
func ncclSteps(l *Layout, stages [][][]Step, k, p int, mem []*Mem, sum Sum) error {
	at := func(r int) (Step, bool) {
		if k < len(stages[r]) && p < len(stages[r][k]) {
			st := stages[r][k][p]
			return st, st.Kind == Exchange || st.Kind == CrossRS || st.Kind == CrossAR
		}
		return Step{}, false
	}
	for i := 0; i < l.Local(); i++ {
		comm := l.Cross(i)
		first, ok := at(comm[0])
		for _, r := range comm[1:] {
			st, ok2 := at(r)
			if ok2 != ok || ok && (st.Kind != first.Kind || st.Bytes != first.Bytes) {
				return fmt.Errorf("ranks %d and %d of communicator %v take different steps here (%v, %v)", comm[0], r, comm, first.Kind, st.Kind)
			}
		}
		if !ok {
			continue
		}
		var err error
		switch first.Kind {
		case Exchange:
			err = exchange(comm, at, mem)
		case CrossRS, CrossAR:
			err = crossReduce(comm, at, mem, sum, first.Kind == CrossRS)
		}
		if err != nil {
			return fmt.Errorf("communicator %v: %w", comm, err)
		}
	}
	return nil
}

// exchange matches every send with its receive and copies.
func exchange(comm []int, at func(int) (Step, bool), mem []*Mem) error {
	type pair struct{ from, to int }
	sends := map[pair]Xfer{}
	for _, r := range comm {
		st, _ := at(r)
		for _, x := range st.Sends {
			sends[pair{r, x.Peer}] = x
		}
	}
	for _, r := range comm {
		st, _ := at(r)
		for _, x := range st.Recvs {
			s, ok := sends[pair{x.Peer, r}]
			if !ok || s.Bytes != x.Bytes {
				return fmt.Errorf("rank %d receives %d bytes from rank %d, which sends %d", r, x.Bytes, x.Peer, s.Bytes)
			}
			delete(sends, pair{x.Peer, r})
			src, err := buf(mem[x.Peer], s.At, s.Bytes)
			if err != nil {
				return err
			}
			dst, err := buf(mem[r], x.At, x.Bytes)
			if err != nil {
				return err
			}
			copy(dst, src)
		}
	}
	for p := range sends {
		return fmt.Errorf("rank %d sends to rank %d, which does not receive", p.from, p.to)
	}
	return nil
}

// crossReduce is NCCL's reduce-scatter (rs: rank j of comm gets chunk j of
// the sum of every rank's Src) or all-reduce (Dst in place), summing in
// communicator order.
func crossReduce(comm []int, at func(int) (Step, bool), mem []*Mem, sum Sum, rs bool) error {
	first, _ := at(comm[0])
	size := first.Bytes
	whole := size
	if rs {
		whole = size * int64(len(comm))
	}
	var srcs [][]byte
	for _, r := range comm {
		st, _ := at(r)
		ref := st.Dst
		if rs {
			ref = st.Src
		}
		b, err := buf(mem[r], ref, whole)
		if err != nil {
			return err
		}
		srcs = append(srcs, append([]byte(nil), b...))
	}
	total := make([]byte, whole)
	sum(total, srcs)
	for j, r := range comm {
		st, _ := at(r)
		dst, err := buf(mem[r], st.Dst, size)
		if err != nil {
			return err
		}
		if rs {
			copy(dst, total[int64(j)*size:])
		} else {
			copy(dst, total)
		}
	}
	return nil
}

// span is bytes [lo, hi) of rank Rank's buffer Buf.
type span struct {
	rank   int
	buf    Buf
	lo, hi int64
}

// raceFree checks stage k: no rank reads bytes of a host peer that the
// peer writes in the same stage.
func raceFree(l *Layout, stages [][][]Step, mem []*Mem, k int) error {
	norm := func(r int, b Buf) Buf {
		if b == In && mem[r].Aliased {
			return Out
		}
		return b
	}
	var writes, reads []span
	for r := range stages {
		if k >= len(stages[r]) {
			continue
		}
		for _, st := range stages[r][k] {
			w := func(ref Ref, n int64) {
				writes = append(writes, span{r, norm(r, ref.Buf), ref.Off, ref.Off + n})
			}
			rd := func(from int, ref Ref, n int64) {
				if from != r {
					reads = append(reads, span{from, norm(from, ref.Buf), ref.Off, ref.Off + n})
				}
			}
			switch st.Kind {
			case Copy, CrossAR, CrossRS:
				w(st.Dst, st.Bytes)
			case Pull:
				w(st.Dst, st.Bytes)
				rd(st.Peer, st.Src, st.Bytes)
			case Reduce:
				w(st.Dst, st.Bytes)
				for _, p := range l.hosts[l.Host[r]] {
					rd(p, st.Src, st.Bytes)
				}
			case Exchange:
				for _, x := range st.Recvs {
					w(x.At, x.Bytes)
				}
			}
		}
	}
	for _, rd := range reads {
		for _, w := range writes {
			if rd.rank == w.rank && rd.buf == w.buf && rd.lo < w.hi && w.lo < rd.hi {
				return fmt.Errorf("hier: stage %d: rank %d's %v bytes %d..%d are read by a host peer while rank %d writes them (a Barrier is missing)",
					k, w.rank, w.buf, max(rd.lo, w.lo), min(rd.hi, w.hi), w.rank)
			}
		}
	}
	return nil
}
