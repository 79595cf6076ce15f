package hier

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

// sum32 adds float32 values: small integers, so any order gives the same
// bits and the hierarchical sums equal the flat ones.
func sum32(dst []byte, srcs [][]byte) {
	for i := 0; i+4 <= len(dst); i += 4 {
		var s float32
		for _, b := range srcs {
			s += math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		}
		binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(s))
	}
}

func ints(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := int64(0); i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(rng.IntN(200)-100)))
	}
	return b
}

// layouts: one host, one rank per host, hosts in blocks, hosts
// interleaved, three hosts.
var layouts = [][]int{{0, 0}, {0, 1}, {0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 1, 2, 0, 1, 2}, {1, 1, 0, 0}}

// TestSchedules: every op, in and out of place, on every layout and a few
// sizes (all-reduces whose tensor does not split into whole pieces, or
// leaves a rank none), simulated, gives the flat collective's result, with
// no race between host peers.
func TestSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, host := range layouts {
		l, err := NewLayout(host)
		if err != nil {
			t.Fatalf("%v: %v", host, err)
		}
		n := int64(len(host))
		for _, kind := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce} {
			for _, elems := range []int64{1, 3, 5, 64} {
				for _, inPlace := range []bool{false, true} {
					s := elems * 4
					in := make([][]byte, n)
					for r := range in {
						if kind == coll.ReduceScatter {
							in[r] = ints(rng, n*s)
						} else {
							in[r] = ints(rng, s)
						}
					}
					want := reference(kind, in, s)
					mem := make([]*Mem, n)
					scheds := make([][]Step, n)
					for r := range mem {
						m := &Mem{Scratch: make([]byte, int64(l.Hosts())*s)}
						switch {
						case kind == coll.AllGather && inPlace:
							m.Out = make([]byte, n*s)
							copy(m.Out[int64(r)*s:], in[r])
						case kind == coll.AllGather:
							m.In, m.Out = append([]byte(nil), in[r]...), make([]byte, n*s)
						case kind == coll.ReduceScatter && inPlace:
							m.Out = append([]byte(nil), in[r]...)
						case kind == coll.ReduceScatter:
							m.In, m.Out = append([]byte(nil), in[r]...), make([]byte, s)
						case inPlace: // all-reduce
							m.Out, m.Aliased = append([]byte(nil), in[r]...), true
						default:
							m.In, m.Out = append([]byte(nil), in[r]...), make([]byte, s)
						}
						mem[r] = m
						if scheds[r], err = l.Build(kind, r, s, 4, inPlace && kind != coll.AllReduce); err != nil {
							t.Fatal(err)
						}
					}
					name := func() string { return fmt.Sprintf("%v on hosts %v", kind, host) }
					if err := Simulate(l, scheds, mem, sum32); err != nil {
						t.Fatalf("%s, %d elements, in place %v: %v", name(), elems, inPlace, err)
					}
					for r := range mem {
						got := mem[r].Out
						if kind == coll.ReduceScatter && inPlace {
							got = got[int64(r)*s : int64(r+1)*s]
						}
						if !bytes.Equal(got, want[r]) {
							t.Errorf("%s, %d elements, in place %v: rank %d differs from the flat collective", name(), elems, inPlace, r)
						}
					}
				}
			}
		}
	}
}

// reference is every rank's output of the flat collective.
func reference(kind coll.Kind, in [][]byte, s int64) [][]byte {
	n := int64(len(in))
	out := make([][]byte, n)
	switch kind {
	case coll.AllGather:
		all := bytes.Join(in, nil)
		for r := range out {
			out[r] = all
		}
	case coll.ReduceScatter, coll.AllReduce:
		total := make([]byte, len(in[0]))
		sum32(total, in)
		for r := range out {
			out[r] = total
			if kind == coll.ReduceScatter {
				out[r] = total[int64(r)*s : int64(r+1)*s]
			}
		}
	}
	return out
}

// TestMissingBarrier: an all-gather without the barrier between the
// exchange and the pulls reads a peer's slots while they are written: the
// simulator names it.
func TestMissingBarrier(t *testing.T) {
	l, _ := NewLayout([]int{0, 0, 1, 1})
	scheds := make([][]Step, 4)
	mem := make([]*Mem, 4)
	for r := range scheds {
		s, _ := l.Build(coll.AllGather, r, 16, 4, false)
		for i, st := range s {
			if st.Kind == Barrier {
				s = append(s[:i:i], s[i+1:]...)
				break
			}
		}
		scheds[r], mem[r] = s, &Mem{In: make([]byte, 16), Out: make([]byte, 64)}
	}
	err := Simulate(l, scheds, mem, sum32)
	if err == nil || !strings.Contains(err.Error(), "a Barrier is missing") {
		t.Fatalf("got %v, want a missing-barrier race", err)
	}
}

// TestLayoutErrors: layouts the schedules cannot serve, each with its
// reason.
func TestLayoutErrors(t *testing.T) {
	for _, c := range []struct {
		host []int
		want string
	}{
		{nil, "needs ranks"},
		{[]int{0, 0, 1}, "host 1 has 1 ranks, host 0 has 2"},
		{[]int{0, 0, 2, 2}, "host 1 has no rank"},
		{[]int{0, -1}, "host -1 is not in"},
	} {
		if _, err := NewLayout(c.host); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.host, err, c.want)
		}
	}
	l, _ := NewLayout([]int{0, 1})
	for _, c := range []struct {
		kind        coll.Kind
		r           int
		chunk, unit int64
		want        string
	}{
		{coll.Broadcast, 0, 16, 4, "no hierarchical schedule"},
		{coll.AllGather, 2, 16, 4, "rank 2 is not in"},
		{coll.AllGather, 0, 6, 4, "not a positive number of 4-byte elements"},
	} {
		if _, err := l.Build(c.kind, c.r, c.chunk, c.unit, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v rank %d %d/%d: %v, want %q", c.kind, c.r, c.chunk, c.unit, err, c.want)
		}
	}
}
