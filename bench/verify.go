package bench

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
)

// chunk bounds the host scratch used to write inputs and check outputs
// (a variable so tests can exercise chunk boundaries on small sizes).
var chunk int64 = 8 << 20

// caseData describes the data of one checked collective call.
type caseData struct {
	k     coll.Kind
	dt    coll.DType
	op    coll.ReduceOp
	root  int
	n     int
	rank  int
	l     layout
	seeds []uint64 // input stream seed of every rank
	trash uint64   // seed of the garbage written into outputs first
}

func moveOp(k coll.Kind) bool {
	return k == coll.AllGather || k == coll.Broadcast || k == coll.AllToAll
}

func sub(s coll.Span, off, n int64) coll.Span { return coll.Span{Ptr: s.Ptr + uint64(off), Len: n} }

// input fills dst with bytes [off, off+len(dst)) of rank r's input.
func (c *caseData) input(dst []byte, r int, off int64) {
	if moveOp(c.k) {
		fillBytes(dst, c.seeds[r], off)
		return
	}
	fillValues(dst, c.dt, c.seeds[r], off/int64(c.dt.Size()))
}

// writeInput writes this rank's input into s (s.Len == c.l.inBytes).
func (c *caseData) writeInput(t Target, s coll.Span, scratch []byte) error {
	for off := int64(0); off < s.Len; off += chunk {
		b := scratch[:min(chunk, s.Len-off)]
		es := int64(c.dt.Size())
		parallel(int64(len(b))/es, func(lo, hi int64) { c.input(b[lo*es:hi*es], c.rank, off+lo*es) })
		if err := t.Write(sub(s, off, int64(len(b))), b); err != nil {
			return fmt.Errorf("bench: writing input: %w", err)
		}
	}
	return nil
}

// writeTrash fills s with garbage so stale outputs are caught.
func writeTrash(t Target, s coll.Span, seed uint64, scratch []byte) error {
	for off := int64(0); off < s.Len; off += chunk {
		b := scratch[:min(chunk, s.Len-off)]
		parallel(int64(len(b)), func(lo, hi int64) { fillBytes(b[lo:hi], seed, off+lo) })
		if err := t.Write(sub(s, off, int64(len(b))), b); err != nil {
			return fmt.Errorf("bench: clearing output: %w", err)
		}
	}
	return nil
}

// expected fills want with bytes [off, off+len(want)) of this rank's
// correct output for move ops.
func (c *caseData) expected(want []byte, off int64) {
	if c.k == coll.Broadcast {
		c.input(want, c.root, off)
		return
	}
	// All-gather: slice r of the output is rank r's input; all-to-all:
	// block r is rank r's block for this rank.
	in, at := c.l.inBytes, int64(0)
	if c.k == coll.AllToAll {
		in = c.l.perRank * int64(c.dt.Size())
		at = int64(c.rank) * in
	}
	for len(want) > 0 {
		r, o := int(off/in), off%in
		n := min(int64(len(want)), in-o)
		c.input(want[:n], r, at+o)
		want, off = want[n:], off+n
	}
}

// reference is element j of this rank's correct output for reductions, as
// an exact integer sum/min/max of the inputs (and the divisor for avg).
func (c *caseData) reference(j int64) int64 {
	if c.k == coll.ReduceScatter {
		j += int64(c.rank) * c.l.perRank
	}
	var acc int64
	for r := 0; r < c.n; r++ {
		v := valueAt(c.dt, c.seeds[r], j)
		switch {
		case r == 0:
			acc = v
		case c.op == coll.Min:
			acc = min(acc, v)
		case c.op == coll.Max:
			acc = max(acc, v)
		default:
			acc += v
		}
	}
	return acc
}

// verify reads this rank's output from s and counts wrong elements.
func (c *caseData) verify(t Target, s coll.Span, got, want []byte) (int64, error) {
	es := int64(c.dt.Size())
	var wrong atomic.Int64
	for off := int64(0); off < s.Len; off += chunk {
		g := got[:min(chunk, s.Len-off)]
		if err := t.Read(g, sub(s, off, int64(len(g)))); err != nil {
			return 0, fmt.Errorf("bench: reading output: %w", err)
		}
		w := want[:len(g)]
		parallel(int64(len(g))/es, func(lo, hi int64) {
			var bad int64
			if moveOp(c.k) {
				gp, wp := g[lo*es:hi*es], w[lo*es:hi*es]
				c.expected(wp, off+lo*es)
				if !bytes.Equal(gp, wp) {
					for i := int64(0); i < int64(len(gp)); i += es {
						if !bytes.Equal(gp[i:i+es], wp[i:i+es]) {
							bad++
						}
					}
				}
			} else {
				first := off / es
				for i := lo; i < hi; i++ {
					if !c.match(g[i*es:], c.reference(first+i)) {
						bad++
					}
				}
			}
			wrong.Add(bad)
		})
	}
	return wrong.Load(), nil
}

// parallel splits [0, n) elements over a few goroutines when n is large
// (generating and checking data is counter-based, so any split works).
func parallel(n int64, f func(lo, hi int64)) {
	const grain = 256 << 10
	p := min(int64(runtime.GOMAXPROCS(0)), 8, n/grain)
	if p <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := int64(0); i < p; i++ {
		wg.Add(1)
		go func(lo, hi int64) {
			defer wg.Done()
			f(lo, hi)
		}(n*i/p, n*(i+1)/p)
	}
	wg.Wait()
}

// match compares one reduced element with the exact reference acc.
func (c *caseData) match(b []byte, acc int64) bool {
	if isFloat(c.dt) {
		want := float64(acc)
		if c.op == coll.Avg {
			want /= float64(c.n)
		}
		got := decodeFloat(b, c.dt)
		return math.Abs(got-want) <= tolerance(c.dt)*max(1, math.Abs(want))
	}
	got := decodeInt(b, c.dt)
	if c.op == coll.Avg {
		d := got - acc/int64(c.n) // truncated or floored division both pass
		return d >= -1 && d <= 1
	}
	return got == wrap(acc, c.dt)
}
