package cuda

import (
	"context"
	"encoding/binary"
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
	if r := g.paths.ll.check(new(req(coll.AllReduce, 512, 0x1000, 0x2000))); r != refNoKernels {
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
		if got := g.paths.ll.check(&c.req); got != c.want {
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

// TestLLBytesMode: an ll call whose input or output is off 16 bytes sets
// the kernel's bytes flag and is still one launch; aligned calls do not.
func TestLLBytesMode(t *testing.T) {
	g, rec := goldenGroup(t, goldenCfg{name: "bytes", kern: true, ce: true}, 2, 0)
	for _, shift := range []int64{0, 2, 4, 8, 16} {
		rec.w.Reset()
		req := forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<10, false, "io", shift).req, coll.AlgoLL)
		if _, err := g.Run(context.Background(), req); err != nil {
			t.Fatalf("shift %d: %v", shift, err)
		}
		flags := binary.LittleEndian.Uint32(g.paths.ll.args.Bytes()[arFlags:])
		if got, want := flags&llFlagBytes != 0, shift%16 != 0; got != want {
			t.Errorf("shift %d: bytes flag %v, want %v (flags %#x)", shift, got, want, flags)
		}
		if out := rec.w.String(); strings.Count(out, "launch ") != 1 || strings.Contains(out, "copy") || strings.Contains(out, "scratch") {
			t.Errorf("shift %d: issued\n%s\nwant one launch", shift, out)
		}
	}
}
