package cuda

import (
	"context"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// TestLLArea: both halves' rows fit the pad past llArea, a row holds its
// header line and two lines per 16 bytes of llCap, and the pad is whole
// granules.
func TestLLArea(t *testing.T) {
	const gran = 2 << 20
	for n := 2; n <= kernMaxRanks; n++ {
		pad := padBytes(n, gran)
		if llArea+2*int64(n)*llRowSize > pad || pad%gran != 0 || pad-gran >= llArea+2*int64(n)*llRowSize {
			t.Errorf("n=%d: a pad of %d bytes for rows of %d (want the fewest whole granules of %d that hold them)", n, pad, llRowSize, gran)
		}
	}
	if llRowSize != llLineBytes+2*llCap || llRowSize%llLineBytes != 0 {
		t.Errorf("a row of %d bytes for %d-byte messages", llRowSize, llCap)
	}
	if llArea < lcWords+lcWordBytes {
		t.Errorf("the LL area at %d overlaps the lc words at %d", llArea, lcWords)
	}
}

// TestLLCheck: what the ll path serves and why it refuses the rest.
func TestLLCheck(t *testing.T) {
	g := fakeGroup(4, 1)
	g.paths.ll.args = nil
	req := func(k coll.Kind, count int64, in, out uint64) backend.Request {
		r := backend.Request{Kind: k, DType: coll.BFloat16, Op: coll.Sum, Count: count}
		inN, outN := count*2, count*2
		switch k {
		case coll.AllGather:
			outN *= 4
		case coll.ReduceScatter:
			inN *= 4
		}
		r.In, r.Out = coll.Span{Ptr: in, Len: inN}, coll.Span{Ptr: out, Len: outN}
		return r
	}
	if r := g.paths.ll.check(req(coll.AllReduce, 512, 0x1000, 0x2000)); r != refNoKernels {
		t.Fatalf("without kernels: refusal %d, want refNoKernels", r)
	}
	g.paths.ll.args = cudadrv.NewArgs(llArgBytes)
	most := int64(llCap / 2)
	for _, c := range []struct {
		name string
		req  backend.Request
		want refusal
	}{
		{"all-reduce", req(coll.AllReduce, 512, 0x10000, 0x20000), served},
		{"all-reduce in place", req(coll.AllReduce, 512, 0x10000, 0x10000), served},
		{"all-reduce overlapping", req(coll.AllReduce, 512, 0x10000, 0x10100), refLLAlias},
		{"all-gather in place", req(coll.AllGather, 512, 0x10400, 0x10000), served},
		{"all-gather slot 0 of rank 1", req(coll.AllGather, 512, 0x10000, 0x10000), refLLAlias},
		{"reduce-scatter in place", req(coll.ReduceScatter, 512, 0x10000, 0x10400), served},
		{"reduce-scatter chunk 0", req(coll.ReduceScatter, 512, 0x10000, 0x10000), refLLAlias},
		{"largest", req(coll.AllReduce, most, 0x1000000, 0x2000000), served},
		{"too large", req(coll.AllReduce, most+8, 0x1000000, 0x2000000), refLLSize},
		{"odd count", req(coll.AllReduce, 511, 0x10000, 0x20000), refLLAlign},
		{"input off 16 (staged)", req(coll.AllReduce, 512, 0x10008, 0x20000), served},
		{"output off 16 (staged)", req(coll.AllReduce, 512, 0x10000, 0x20002), served},
		{"broadcast", backend.Request{Kind: coll.Broadcast, DType: coll.BFloat16, Count: 512}, refKind},
		{"max", backend.Request{Kind: coll.AllReduce, DType: coll.BFloat16, Op: coll.Max, Count: 512}, refOp},
	} {
		if got := g.paths.ll.check(c.req); got != c.want {
			t.Errorf("%s: refusal %d, want %d (%v)", c.name, got, c.want, g.paths.ll.whyNot(c.req))
		}
		if err := g.paths.ll.whyNot(c.req); (err == nil) != (c.want == served) {
			t.Errorf("%s: whyNot %v", c.name, err)
		}
	}
}

// TestDescribePad: doctor's group line gives the signal pad's size and the
// largest ll row it holds.
func TestDescribePad(t *testing.T) {
	g := fakeGroup(2, 0)
	g.b.groups = []*Group{g}
	want := "signal pad 10 MiB (ll rows up to 1024 KiB)"
	if got := g.b.Describe(); !strings.Contains(got, want) {
		t.Errorf("Describe:\n%s\nwant a group line with %q", got, want)
	}
}

// stagingExec counts what a staged ll call allocates: the group's staging
// (local), or scratch while stream captured is captured.
type stagingExec struct {
	nopExec
	captured                    uint64
	locals, scratches, releases int
}

func (x *stagingExec) capturing(_ *cudadrv.Context, s uint64) (bool, error) {
	return s == x.captured, nil
}

func (x *stagingExec) local(c *cudadrv.Context, size, gran int64) (*segment, error) {
	x.locals++
	return x.nopExec.local(c, size, gran)
}

func (x *stagingExec) scratch(c *cudadrv.Context, s uint64, n int64) (uint64, error) {
	x.scratches++
	return x.nopExec.scratch(c, s, n)
}

func (x *stagingExec) release(*cudadrv.Context, uint64, uint64) { x.releases++ }

// TestLLStaging: eager ll calls on buffers off 16 bytes share the group's
// staging, allocated once and large enough for the largest row; captured
// ones take stream-ordered scratch each and release it; aligned calls
// take neither.
func TestLLStaging(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "staging", kern: true, ce: true}, 2, 0)
	x := &stagingExec{captured: callerStream}
	g.x = x
	run := func(shift int64, stream uint64, count int64) {
		t.Helper()
		req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, count, false, "io", shift).req, coll.AlgoLL)
		req.Stream = stream
		if _, err := g.Run(context.Background(), req); err != nil {
			t.Fatalf("shift %d stream %#x: %v", shift, stream, err)
		}
	}
	run(0, ownStream, 1<<10) // aligned: no staging
	if x.locals+x.scratches != 0 {
		t.Fatalf("an aligned call staged: %+v", x)
	}
	run(4, ownStream, 1<<10)
	run(2, ownStream, llCap/2) // the largest row
	if x.locals != 1 || x.scratches != 0 {
		t.Fatalf("eager staged calls: %d local allocations and %d scratch, want 1 and 0", x.locals, x.scratches)
	}
	if want := 2*int64(len(g.ranks))*llCap + llVec; g.paths.ll.staging.size < want {
		t.Fatalf("staging of %d bytes, a row of %d needs %d", g.paths.ll.staging.size, llCap, want)
	}
	run(4, callerStream, 1<<10)
	run(4, callerStream, 1<<10)
	if x.locals != 1 || x.scratches != 2 || x.releases != 2 {
		t.Fatalf("captured staged calls: %d local, %d scratch, %d released, want 1, 2, 2", x.locals, x.scratches, x.releases)
	}
}
