package symmem

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
)

func init() {
	roles["a2a"] = roleA2A
	roles["a2a-sizes"] = roleA2ASizes
}

// TestAllToAll runs the three forms of all-to-all on 3 ranks: every dtype,
// symmetric and staged, random split matrices (zeros, a rank sending
// nothing, all to one rank), and the errors every rank must get alike.
func TestAllToAll(t *testing.T) {
	before := shmFiles(t)
	expectOK(t, spawn(t, 3, "a2a"))
	noNewShm(t, before)
}

// TestAllToAllSizes runs each form on groups of 1 to 10 ranks.
func TestAllToAllSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("10 processes")
	}
	expectOK(t, spawn(t, 10, "a2a-sizes"))
}

// a2aBufs are the symmetric buffers of the all-to-all tests: in and out
// (cap bytes each), the device split counts and their output.
type a2aBufs struct {
	in, out, splits, splitsOut Buffer
}

func allocA2A(ctx context.Context, g *Group, cap int64) (a2aBufs, error) {
	sc, err := g.OpenScope()
	if err != nil {
		return a2aBufs{}, err
	}
	var b a2aBufs
	n := int64(g.Size())
	for _, x := range []struct {
		b     *Buffer
		bytes int64
	}{{&b.in, cap}, {&b.out, cap}, {&b.splits, 8 * n}, {&b.splitsOut, 16 * n}} {
		if *x.b, err = sc.Alloc(x.bytes); err != nil {
			return b, err
		}
	}
	return b, sc.End(ctx)
}

// a2aByte is byte k of what rank i sends rank j in case id.
func a2aByte(id uint64, i, j, k int) byte {
	return byte(mix(id^uint64(i)<<40^uint64(j)<<20^uint64(k)) >> 17)
}

// a2aMatrix is case id's counts (elements from rank i to rank j), alike on
// every rank: shape 0 random with zeros, 1 rank 0 sends nothing, 2 all to
// the last rank, 3 equal blocks of most.
func a2aMatrix(id uint64, n, shape int, most int64) [][]int64 {
	r := rand.New(rand.NewPCG(id, uint64(shape)))
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
		for j := range m[i] {
			switch {
			case shape == 1 && i == 0:
			case shape == 2 && j != n-1:
			case shape == 3:
				m[i][j] = most
			case shape == 0 && r.IntN(4) == 0:
			default:
				m[i][j] = r.Int64N(most + 1)
			}
		}
	}
	return m
}

// a2aCase runs one all-to-all of counts on g and checks out: form "equal"
// (counts must be equal blocks), "v" (host counts) or "dev" (device
// counts; symmetric only); staged uses ordinary memory.
func a2aCase(ctx context.Context, g *Group, b a2aBufs, form string, staged bool, dt coll.DType, counts [][]int64, id uint64) error {
	n, me, es := g.Size(), g.Rank(), dt.Size()
	var send, recv []int64
	var sendB, recvB int
	for j := range n {
		send, recv = append(send, counts[me][j]), append(recv, counts[j][me])
		sendB, recvB = sendB+int(counts[me][j])*es, recvB+int(counts[j][me])*es
	}
	in, out := b.in.Bytes(), b.out.Bytes()
	if staged {
		in, out = make([]byte, sendB+3*es), make([]byte, recvB+5*es)
	}
	if form == "equal" {
		in, out = in[:sendB], out[:recvB]
	}
	for i := range out {
		out[i] = 0xee
	}
	k := 0
	for j := range n {
		for x := range int(counts[me][j]) * es {
			in[k] = a2aByte(id, me, j, x)
			k++
		}
	}
	what := fmt.Sprintf("all_to_all %s staged=%v %v counts=%v on group %q rank %d", form, staged, dt, counts, g.Name(), me)
	var path coll.Path
	var err error
	switch form {
	case "equal":
		path, err = g.AllToAll(ctx, HostSpan(out), HostSpan(in), dt)
	case "v":
		path, err = g.AllToAllV(ctx, HostSpan(out), HostSpan(in), send, recv, dt)
	case "dev":
		sp := b.splits.Bytes()
		for j, c := range send {
			binary.NativeEndian.PutUint64(sp[8*j:], uint64(c))
		}
		path, err = g.AllToAllVDev(ctx, HostSpan(out), HostSpan(in), b.splits.Span, b.splitsOut.Span, dt)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if path.Staged != staged && path.Reason != emptyCall {
		return fmt.Errorf("%s: path %v, want staged=%v", what, path, staged)
	}
	k = 0
	for i := range n {
		for x := range int(counts[i][me]) * es {
			if want := a2aByte(id, i, me, x); out[k] != want {
				return fmt.Errorf("%s: out byte %d (byte %d from rank %d) is %#x, want %#x", what, k, x, i, out[k], want)
			}
			k++
		}
	}
	if form != "equal" {
		for ; k < len(out) && k < recvB+5*es; k++ {
			if out[k] != 0xee {
				return fmt.Errorf("%s: out byte %d past the received %d was written", what, k, recvB)
			}
		}
	}
	if form == "dev" {
		so := b.splitsOut.Bytes()
		var off int64
		for i := range n {
			c, o := int64(binary.NativeEndian.Uint64(so[8*i:])), int64(binary.NativeEndian.Uint64(so[8*(n+i):]))
			if c != counts[i][me] || o != off {
				return fmt.Errorf("%s: splitsOut[%d] = %d, offset %d; want %d at %d", what, i, c, o, counts[i][me], off)
			}
			off += c
		}
	}
	return nil
}

// a2aAllForms runs equal, v (symmetric and staged) and dev on counts.
func a2aAllForms(ctx context.Context, g *Group, b a2aBufs, dt coll.DType, counts [][]int64, id uint64, staged bool) error {
	forms := []string{"v", "dev"}
	equal := true
	for _, row := range counts {
		for _, c := range row {
			equal = equal && c == counts[0][0]
		}
	}
	if equal {
		forms = append(forms, "equal")
	}
	for _, f := range forms {
		for _, st := range []bool{false, true} {
			if st && (f == "dev" || !staged) {
				continue
			}
			id++
			if err := a2aCase(ctx, g, b, f, st, dt, counts, id); err != nil {
				return err
			}
		}
	}
	return nil
}

func roleA2A(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	g := w.World()
	n := g.Size()
	b, err := allocA2A(ctx, g, 1<<20)
	if err != nil {
		return err
	}
	id := uint64(1)
	for _, dt := range coll.DTypes() {
		for shape := range 4 {
			id += 100
			if err := a2aAllForms(ctx, g, b, dt, a2aMatrix(id, n, shape, 37), id, true); err != nil {
				return err
			}
		}
	}
	// Several staging rounds (64 KiB / (2 × 3 ranks) per block and round)
	// and the worker path.
	for shape := range 4 {
		id += 100
		if err := a2aAllForms(ctx, g, b, coll.Int8, a2aMatrix(id, n, shape, 40000), id, true); err != nil {
			return err
		}
	}
	// An empty equal call, and a split call where nobody sends.
	if err := a2aAllForms(ctx, g, b, coll.Float32, a2aMatrix(id, n, 3, 0), id+1, true); err != nil {
		return err
	}
	if err := a2aErrors(ctx, g, b); err != nil {
		return err
	}
	// The group still works after the errors.
	if err := a2aAllForms(ctx, g, b, coll.Float16, a2aMatrix(id+7, n, 0, 50), id+7, false); err != nil {
		return err
	}
	return w.Close()
}

// a2aErrors checks the refusals: bad arguments on this rank (ErrInvalid,
// nothing sent, so every rank makes them), and the errors every rank gets
// alike from the in-band checks, after which the group stays usable.
func a2aErrors(ctx context.Context, g *Group, b a2aBufs) error {
	n, me := g.Size(), g.Rank()
	in, out := b.in.Bytes(), b.out.Bytes()
	ones := func(v int64) []int64 {
		c := make([]int64, n)
		for i := range c {
			c[i] = v
		}
		return c
	}
	neg := ones(1)
	neg[n-1] = -1
	for _, c := range []struct {
		name, want string
		call       func() error
	}{
		{"indivisible", "not divisible by the group size", func() error {
			_, err := g.AllToAll(ctx, HostSpan(out[:4*n+4]), HostSpan(in[:4*n+4]), coll.Float32)
			return err
		}},
		{"in-place", "out of place only", func() error {
			_, err := g.AllToAll(ctx, HostSpan(in[:8*n]), HostSpan(in[:8*n]), coll.Float32)
			return err
		}},
		{"short slice", fmt.Sprintf("sendCounts holds %d counts", n-1), func() error {
			_, err := g.AllToAllV(ctx, HostSpan(out), HostSpan(in), make([]int64, n-1), ones(1), coll.Int8)
			return err
		}},
		{"negative", "sendCounts[" + fmt.Sprint(n-1) + "] is -1", func() error {
			_, err := g.AllToAllV(ctx, HostSpan(out), HostSpan(in), neg, ones(1), coll.Int8)
			return err
		}},
		{"overrun", "recvCounts sum to", func() error {
			_, err := g.AllToAllV(ctx, HostSpan(out[:n-1]), HostSpan(in), ones(1), ones(1), coll.Int8)
			return err
		}},
		{"splits length", "splits at", func() error {
			_, err := g.AllToAllVDev(ctx, b.out.Span, b.in.Span, coll.Span{Ptr: b.splits.Ptr, Len: 4}, b.splitsOut.Span, coll.Int8)
			return err
		}},
		{"ordinary splits", "must all be symmetric", func() error {
			_, err := g.AllToAllVDev(ctx, b.out.Span, b.in.Span, HostSpan(make([]byte, 8*n)), b.splitsOut.Span, coll.Int8)
			return err
		}},
	} {
		if n == 1 && c.name == "indivisible" {
			continue
		}
		if err := c.call(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			return fmt.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	if n < 2 {
		return nil
	}
	// Rank 1 expects one element more from rank 0 than rank 0 sends.
	recv := ones(2)
	if me == 1 {
		recv[0] = 3
	}
	_, err := g.AllToAllV(ctx, b.out.Span, b.in.Span, ones(2), recv, coll.Int32)
	want := fmt.Sprintf("rank %d sends 2 elements to rank %d, but rank %d expects 3 from rank %d", g.ranks[0], g.ranks[1], g.ranks[1], g.ranks[0])
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("count mismatch: %v, want ErrMismatch saying %q", err, want)
	}
	// One rank calls the equal form, the others the host-split form.
	if me == 0 {
		_, err = g.AllToAll(ctx, HostSpan(out[:8*n]), HostSpan(in[:8*n]), coll.Int64)
	} else {
		_, err = g.AllToAllV(ctx, HostSpan(out[:8*n]), HostSpan(in[:8*n]), ones(1), ones(1), coll.Int64)
	}
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "split counts") {
		return fmt.Errorf("form mismatch: %v, want ErrMismatch naming the split counts", err)
	}
	// Device counts past rank 1's out: refused on every rank, nothing
	// written (out and splitsOut keep their bytes, also past the capacity).
	sp := b.splits.Bytes()
	for j := range n {
		c := uint64(4)
		if me == 0 && j == 1 {
			c = 5
		}
		binary.NativeEndian.PutUint64(sp[8*j:], c)
	}
	for i := range out {
		out[i] = 0x5a
	}
	so := b.splitsOut.Bytes()
	for i := range so {
		so[i] = 0x5a
	}
	outCap := coll.Span{Ptr: b.out.Ptr, Len: int64(4 * n)}
	_, err = g.AllToAllVDev(ctx, outCap, b.in.Span, b.splits.Span, b.splitsOut.Span, coll.Int8)
	want = fmt.Sprintf("rank %d would receive %d elements, but its out holds %d", g.ranks[1], 4*n+1, 4*n)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("device counts overrun: %v, want ErrInvalid saying %q", err, want)
	}
	if bytes.ContainsFunc(out, func(r rune) bool { return r != 0x5a }) || bytes.ContainsFunc(so, func(r rune) bool { return r != 0x5a }) {
		return fmt.Errorf("device counts overrun: out or splitsOut was written")
	}
	// A negative device count is refused alike.
	if me == n-1 {
		binary.NativeEndian.PutUint64(sp[0:], ^uint64(0))
	}
	_, err = g.AllToAllVDev(ctx, b.out.Span, b.in.Span, b.splits.Span, b.splitsOut.Span, coll.Int8)
	if want = fmt.Sprintf("rank %d's split count for rank %d is -1", g.ranks[n-1], g.ranks[0]); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		return fmt.Errorf("negative device count: %v, want ErrInvalid saying %q", err, want)
	}
	return nil
}

// roleA2ASizes runs the forms on the groups of the first k ranks, k = 1..n.
func roleA2ASizes(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	for k := 1; k <= w.Size(); k++ {
		ranks := make([]int, k)
		for i := range ranks {
			ranks[i] = i
		}
		g := w.World()
		if k < w.Size() {
			if g, err = w.NewGroup(ctx, fmt.Sprintf("first%d", k), ranks); err != nil {
				return err
			}
		}
		b, err := allocA2A(ctx, g, 64<<10)
		if err != nil {
			return err
		}
		if g.IsMember() {
			for shape := range 4 {
				id := uint64(k*10 + shape)
				dt := []coll.DType{coll.Int8, coll.BFloat16, coll.Float32, coll.Int64}[shape]
				if err := a2aAllForms(ctx, g, b, dt, a2aMatrix(id, k, shape, 300), id, shape == 0); err != nil {
					return err
				}
			}
			if err := a2aErrors(ctx, g, b); err != nil {
				return err
			}
		}
		for _, x := range []Buffer{b.in, b.out, b.splits, b.splitsOut} {
			if err := w.Free(x); err != nil {
				return err
			}
		}
		if k < w.Size() {
			if err := g.Close(ctx); err != nil {
				return err
			}
		}
	}
	return w.Close()
}
