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

// layouts: one host, one rank per host, hosts of 2 and 4 ranks, three
// hosts, hosts in another order (all blocked).
var layouts = [][]int{{0, 0}, {0, 1}, {0, 0, 1, 1}, {0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 1, 1, 2, 2}, {1, 1, 0, 0}}

// arena lays out rank r's buffers for a call of kind moving s bytes per
// rank on n ranks, in place or not, with in's bytes as its input.
func arena(kind coll.Kind, r int, n, s int64, inPlace bool, in []byte, scratch int64) *Mem {
	m := &Mem{InLen: int64(len(in)), Scratch: make([]byte, scratch)}
	m.OutLen = s
	if kind == coll.AllGather {
		m.OutLen = n * s
	}
	switch {
	case !inPlace:
		m.Arena = make([]byte, m.InLen+m.OutLen)
		m.OutOff = m.InLen
	case kind == coll.AllGather:
		m.Arena = make([]byte, m.OutLen)
		m.InOff = int64(r) * s
	case kind == coll.ReduceScatter:
		m.Arena = make([]byte, m.InLen)
		m.OutOff = int64(r) * s
	default:
		m.Arena = make([]byte, m.InLen)
	}
	copy(m.Arena[m.InOff:], in)
	return m
}

// TestSchedules: every op, in and out of place, on every layout and a few
// sizes, simulated, gives the flat collective's result, and leaves an
// out-of-place call's input as it was.
func TestSchedules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, host := range layouts {
		l, err := NewLayout(host)
		if err != nil {
			t.Fatalf("%v: %v", host, err)
		}
		n := int64(len(host))
		for _, kind := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce} {
			for _, elems := range []int64{1, 3, 8, 64} {
				if kind == coll.AllReduce && elems%int64(l.Local()) != 0 {
					continue // TestAllReducePieces
				}
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
						mem[r] = arena(kind, r, n, s, inPlace, in[r], l.ScratchBytes(kind, s))
						if scheds[r], err = l.Build(kind, r, s, 4, inPlace); err != nil {
							t.Fatal(err)
						}
					}
					name := fmt.Sprintf("%v on hosts %v, %d elements, in place %v", kind, host, elems, inPlace)
					if err := Simulate(l, scheds, mem, sum32); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for r, m := range mem {
						if got := m.Arena[m.OutOff : m.OutOff+m.OutLen]; !bytes.Equal(got, want[r]) {
							t.Errorf("%s: rank %d differs from the flat collective", name, r)
						}
						if !inPlace && !bytes.Equal(m.Arena[:m.InLen], in[r]) {
							t.Errorf("%s: rank %d's input changed", name, r)
						}
					}
				}
			}
		}
	}
}

// TestAllReducePieces: an all-reduce whose tensor does not split into L
// whole pieces, and layouts whose hosts' ranks are not consecutive, are
// refused.
func TestAllReducePieces(t *testing.T) {
	l, _ := NewLayout([]int{0, 0, 0, 1, 1, 1})
	if _, err := l.Build(coll.AllReduce, 0, 4*4, 4, false); err == nil || !strings.Contains(err.Error(), "3 pieces") {
		t.Errorf("4 elements on hosts of 3: got %v, want a refusal naming the pieces", err)
	}
	l, _ = NewLayout([]int{0, 1, 0, 1})
	if l.Blocked() {
		t.Fatal("hosts 0,1,0,1 count as blocked")
	}
	if _, err := l.Build(coll.AllGather, 0, 16, 4, false); err == nil || !strings.Contains(err.Error(), "not consecutive") {
		t.Errorf("interleaved hosts: got %v, want a refusal", err)
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

// TestOverlapCaught: a schedule whose host all-gather reads from a span
// that overlaps its output other than in place is reported (the check
// that keeps the schedules within what the GPU paths accept can fail).
func TestOverlapCaught(t *testing.T) {
	l, _ := NewLayout([]int{0, 0, 1, 1})
	scheds := make([][]Step, 4)
	mem := make([]*Mem, 4)
	for r := range scheds {
		s, _ := l.Build(coll.AllGather, r, 16, 4, false)
		for i, st := range s {
			if st.Kind == HostAG {
				s[i].In.Off += 4 // a slot off by one element
			}
		}
		scheds[r], mem[r] = s, arena(coll.AllGather, r, 4, 16, false, make([]byte, 16), l.ScratchBytes(coll.AllGather, 16))
	}
	err := Simulate(l, scheds, mem, sum32)
	if err == nil || !strings.Contains(err.Error(), "overlap, not in place") {
		t.Fatalf("got %v, want an overlap error", err)
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
