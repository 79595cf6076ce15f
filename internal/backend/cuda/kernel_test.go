package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// TestKernelPTXMatchesGo: each kernel's PTX reads exactly the parameter
// offsets kernel.go / allreduce.go write, declares the block's size, and
// uses the region offsets.
func TestKernelPTXMatchesGo(t *testing.T) {
	common := []int{argRegion, argMe, argN, argTimeout, argHash, argFault, argUnit}
	for r := 0; r < kernMaxRanks; r++ {
		common = append(common, argPeerRegion+8*r)
	}
	ag := append([]int{argIn, argSlice, argMask, arFlags, argStop}, common...)
	ar := append([]int{arOut, arBytes, arDType, arFlags, argStop}, common...)
	for r := 0; r < kernMaxRanks; r++ {
		ag = append(ag, argDst+8*r)
		ar = append(ar, arSrc+8*r)
	}
	lc := []int{arOut, arBytes, argRegion, argMe, argN, arDType, arFlags, lcOwn, lcStaging, lcChunk, argTimeout, argHash, argUnit}
	for _, k := range []struct {
		name, src, entry string
		want             []int
		signals          bool // uses the signal region's ready and done words
	}{{"allgather", ptxOf(t, agKernel), kernelEntries[agKernel].name, ag, true}, {"allreduce", ptxOf(t, arKernel), kernelEntries[arKernel].name, ar, true},
		{"reducescatter", ptxOf(t, lcKernel), kernelEntries[lcKernel].name, lc, false}} {
		t.Run(k.name, func(t *testing.T) {
			if !strings.Contains(k.src, fmt.Sprintf(".b8 P[%d]", kernArgBytes)) {
				t.Fatalf("the PTX does not declare a %d-byte parameter block", kernArgBytes)
			}
			if !strings.Contains(k.src, ".entry "+k.entry+"(") {
				t.Fatalf("entry %s missing", k.entry)
			}
			var got []int
			for _, m := range regexp.MustCompile(`\[P\+(\d+)\]`).FindAllStringSubmatch(k.src, -1) {
				off, _ := strconv.Atoi(m[1])
				if !slices.Contains(got, off) {
					got = append(got, off)
				}
			}
			slices.Sort(got)
			want := slices.Clone(k.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("PTX reads parameter offsets %v, Go writes %v", got, want)
			}
			// launch and finished words, headers (8 bytes per rank), then ready
			// and done after kernMaxCTAs words, kernMaxCTAs*kernMaxRanks words each.
			table := 4 * kernMaxCTAs * kernMaxRanks
			ready, done := 4*kernMaxCTAs, 4*kernMaxCTAs+table
			if regionLaunch != 0 || regionFinished != 4 || regionHeader != 8 || regionSkip != regionHeader+8*kernMaxRanks || regionReported != regionSkip+4 || regionReported+4 > ready ||
				ready != regionReady || done != regionDone || done+table != regionBytes {
				t.Fatalf("region layout: launch %d finished %d header %d ready %d done %d size %d", regionLaunch, regionFinished, regionHeader, regionReady, regionDone, regionBytes)
			}
			for _, off := range []int{regionHeader, ready, done} {
				if k.signals && !strings.Contains(k.src, ", "+strconv.Itoa(off)+";") {
					t.Errorf("PTX never adds region offset %d", off)
				}
			}
		})
	}
	if argPeerRegion+8*kernMaxRanks != argTimeout || argTimeout+8 != argHash || argFault+8 != argStop || argStop+8 != kernArgBytes {
		t.Fatalf("block layout: peer regions end at %d, timeout at %d, hash at %d, fault at %d, stop at %d, size %d",
			argPeerRegion+8*kernMaxRanks, argTimeout, argHash, argFault, argStop, kernArgBytes)
	}
	if end := regionBytes; kernRegion+end > lcWords || lcWords+lcWordBytes > 128<<10 {
		t.Fatalf("the kernel region (%d bytes) and lc's words overlap or leave the first 128 KiB of the pad", end)
	}
	if arMaxBytes != 2<<20 {
		t.Fatalf("arMaxBytes = %d, the PTX's shared memory holds 2 MiB per call", arMaxBytes)
	}
}

func TestAllGatherArgs(t *testing.T) {
	tests := []struct {
		name    string
		n, me   int
		inPlace bool
		mask    uint32
	}{
		{"2 ranks out-of-place", 2, 0, false, 0b11},
		{"2 ranks in-place", 2, 1, true, 0b01},
		{"4 ranks out-of-place", 4, 2, false, 0b1111},
		{"8 ranks in-place", 8, 7, true, 0b0111_1111},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(tc.n, tc.me)
			g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
			defer g.paths.kernel.args.Free()
			const count = 4096
			req := gatherReq(g, count, tc.inPlace)
			if err := g.paths.kernel.fillAllGatherArgs(g.paths.kernel.args, req); err != nil {
				t.Fatal(err)
			}
			b := g.paths.kernel.args.Bytes()
			u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
			u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
			slice := uint64(count * 2)
			if u64(argIn) != req.In.Ptr || u64(argSlice) != slice || u32(argMe) != uint32(tc.me) || u32(argN) != uint32(tc.n) {
				t.Fatalf("header: in %#x slice %d me %d n %d", u64(argIn), u64(argSlice), u32(argMe), u32(argN))
			}
			if u64(argTimeout) != uint64(g.b.watchdog.Nanoseconds()) || g.b.watchdog <= 0 {
				t.Fatalf("watchdog %d ns, backend's %v", u64(argTimeout), g.b.watchdog)
			}
			if u32(argMask) != tc.mask {
				t.Fatalf("mask %b, want %b", u32(argMask), tc.mask)
			}
			if u64(argRegion) != g.peers.pads[tc.me]+kernRegion {
				t.Fatalf("own region %#x", u64(argRegion))
			}
			for r := 0; r < tc.n; r++ {
				// Target r receives this rank's slice at slot me of r's output.
				want := seg1(g).bases[r] + uint64(tc.me)*slice
				if got := u64(argDst + 8*r); got != want {
					t.Fatalf("dst[%d] = %#x, want %#x", r, got, want)
				}
				if got := u64(argPeerRegion + 8*r); got != g.peers.pads[r]+kernRegion {
					t.Fatalf("region[%d] = %#x", r, got)
				}
			}
		})
	}
}

func TestAllGatherCTAs(t *testing.T) {
	tests := []struct {
		slice int64
		limit int
		want  int
	}{
		{16, 32, 1},
		{kernThreads * 16 * kernVecsPerThread, 32, 1},
		{kernThreads*16*kernVecsPerThread + 16, 32, 2},
		{512 << 10, 64, 16}, // 1 MiB all-gather on 2 ranks
		{8 << 20, 64, 64},
		{8 << 20, 200, kernMaxCTAs},
		{1 << 30, 8, 8},
	}
	for _, tt := range tests {
		if got := allGatherCTAs(tt.slice, tt.limit); got != tt.want {
			t.Errorf("allGatherCTAs(%d, %d) = %d, want %d", tt.slice, tt.limit, got, tt.want)
		}
	}
}

func TestAllReduceArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, me   int
		dt      coll.DType
		inPlace bool
	}{{"2 ranks bf16", 2, 1, coll.BFloat16, false}, {"4 ranks f32 in-place", 4, 2, coll.Float32, true}, {"8 ranks f16", 8, 0, coll.Float16, false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(tc.n, tc.me)
			g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
			defer g.paths.kernel.args.Free()
			const bytes = 1 << 20
			req := arReq(g, bytes/int64(tc.dt.Size()), tc.dt, tc.inPlace)
			if err := g.paths.kernel.whyNot(req); err != nil {
				t.Fatal(err)
			}
			if err := g.paths.kernel.fillReduction(req); err != nil {
				t.Fatal(err)
			}
			b := g.paths.kernel.args.Bytes()
			u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
			u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
			if u64(arOut) != req.Out.Ptr || u64(arBytes) != bytes || u32(argMe) != uint32(tc.me) || u32(argN) != uint32(tc.n) || u32(arDType) != arDTypes[tc.dt] {
				t.Fatalf("header: out %#x bytes %d me %d n %d dtype %d", u64(arOut), u64(arBytes), u32(argMe), u32(argN), u32(arDType))
			}
			if u64(argRegion) != g.peers.pads[tc.me]+kernRegion || u64(argTimeout) != uint64(g.b.watchdog.Nanoseconds()) {
				t.Fatalf("region %#x timeout %d", u64(argRegion), u64(argTimeout))
			}
			for r := 0; r < tc.n; r++ {
				want := seg1(g).bases[r] + uint64(req.InSym.Off) // rank r's input as mapped here
				if got := u64(arSrc + 8*r); got != want {
					t.Fatalf("src[%d] = %#x, want %#x", r, got, want)
				}
				if got := u64(argPeerRegion + 8*r); got != g.peers.pads[r]+kernRegion {
					t.Fatalf("region[%d] = %#x", r, got)
				}
			}
			for _, c := range []struct {
				bytes int64
				want  int
			}{{16, 1}, {kernThreads * kernAlign, 1}, {kernThreads*kernAlign + 16, 2}, {512 << 10, 64}, {bytes, 64}, {arMaxBytes, 64}} {
				if got := allReduceCTAs(c.bytes); got != c.want {
					t.Fatalf("allReduceCTAs(%d) = %d, want %d", c.bytes, got, c.want)
				}
			}
		})
	}
}

// arReq is an all-reduce of count elements per rank in segment 1: input at
// offset 512 MiB, output at 0 (in-place: both at 0).
func arReq(g *Group, count int64, dt coll.DType, inPlace bool) backend.Request {
	bytes := count * int64(dt.Size())
	base := seg1(g).bases[g.Me]
	req := backend.Request{Kind: coll.AllReduce, DType: dt, Op: coll.Sum, Count: count,
		Out: coll.Span{Ptr: base, Len: bytes}, OutSym: backend.Sym{OK: true, Seg: 1, Off: 0},
		In: coll.Span{Ptr: base + 512<<20, Len: bytes}, InSym: backend.Sym{OK: true, Seg: 1, Off: 512 << 20}}
	if inPlace {
		req.In, req.InSym = req.Out, req.OutSym
	}
	return req.Shaped(len(g.Ranks), g.Me)
}

// TestReduceScatterArgs: a reduce-scatter runs the all-reduce kernel on
// chunk me of every rank's input.
func TestReduceScatterArgs(t *testing.T) {
	const n, me, chunk = 4, 2, 64 << 10
	g := fakeGroup(n, me)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	req := arReq(g, chunk/2, coll.BFloat16, false)
	req.Kind = coll.ReduceScatter
	req.In.Len = chunk * n
	if err := g.paths.kernel.whyNot(req); err != nil {
		t.Fatal(err)
	}
	if err := g.paths.kernel.fillReduction(req); err != nil {
		t.Fatal(err)
	}
	b := g.paths.kernel.args.Bytes()
	if got := binary.LittleEndian.Uint64(b[arBytes:]); got != chunk {
		t.Fatalf("bytes %d, want the chunk (%d)", got, chunk)
	}
	for r := 0; r < n; r++ {
		want := seg1(g).bases[r] + uint64(req.InSym.Off) + me*chunk
		if got := binary.LittleEndian.Uint64(b[arSrc+8*r:]); got != want {
			t.Fatalf("src[%d] = %#x, want chunk %d of rank %d's input (%#x)", r, got, me, r, want)
		}
	}
}

// TestReductionFlags: results are stored at once unless a peer still reads
// the output (in-place all-reduce); avg is flagged.
func TestReductionFlags(t *testing.T) {
	g := fakeGroup(4, 2)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	rsInPlace := rsReq(g, 1<<10)
	rsInPlace.Out = coll.Span{Ptr: rsInPlace.In.Ptr + 2*2<<10, Len: 2 << 10}
	rsInPlace.OutSym = backend.Sym{OK: true, Seg: 1, Off: rsInPlace.InSym.Off + 2*2<<10}
	rsAlias := rsInPlace
	rsAlias.Out.Ptr -= 2 << 10 // chunk 1: rank 1 reads it
	for _, tc := range []struct {
		name string
		req  backend.Request
		want uint32
	}{
		{"all-reduce out-of-place", arReq(g, 1<<10, coll.BFloat16, false), arFlagDirect},
		{"all-reduce in-place", arReq(g, 1<<10, coll.BFloat16, true), 0},
		{"all-reduce avg", arAvg(g), arFlagDirect | arFlagAvg},
		{"reduce-scatter", rsReq(g, 1<<10), arFlagDirect},
		{"reduce-scatter in-place (chunk me)", rsInPlace, arFlagDirect},
		{"reduce-scatter into another rank's chunk", rsAlias, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := g.paths.kernel.fillReduction(tc.req); err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint32(g.paths.kernel.args.Bytes()[arFlags:]); got != tc.want {
				t.Fatalf("flags %b, want %b", got, tc.want)
			}
		})
	}
}

// TestTwoShotArgs: the first launch reduces chunk me of every input into
// chunk me of the output; the second pushes that chunk into every peer's
// output, in place.
func TestTwoShotArgs(t *testing.T) {
	const n, me = 4, 1
	g := fakeGroup(n, me)
	g.paths.kernel.args, g.paths.twoShot.second = cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	defer g.paths.twoShot.second.Free()
	for _, inPlace := range []bool{false, true} {
		req := arReq(g, 1<<20, coll.BFloat16, inPlace) // 2 MiB: chunks of 512 KiB
		const chunk = 512 << 10
		if err := g.paths.twoShot.whyNot(req); err != nil {
			t.Fatal(err)
		}
		if _, err := g.paths.twoShot.fill(req); err != nil {
			t.Fatal(err)
		}
		a, b := g.paths.kernel.args.Bytes(), g.paths.twoShot.second.Bytes()
		u64 := func(x []byte, off int) uint64 { return binary.LittleEndian.Uint64(x[off:]) }
		mine := req.Out.Ptr + me*chunk
		if u64(a, arOut) != mine || u64(a, arBytes) != chunk || binary.LittleEndian.Uint32(a[arFlags:]) != arFlagDirect|kernFlagFirst {
			t.Fatalf("in-place %v: reduction out %#x bytes %d flags %d", inPlace, u64(a, arOut), u64(a, arBytes), binary.LittleEndian.Uint32(a[arFlags:]))
		}
		if u64(b, argIn) != mine || u64(b, argSlice) != chunk || binary.LittleEndian.Uint32(b[argMask:]) != 0b1101 || binary.LittleEndian.Uint32(b[arFlags:]) != kernFlagSecond {
			t.Fatalf("in-place %v: all-gather in %#x slice %d mask %b flags %d", inPlace, u64(b, argIn), u64(b, argSlice), binary.LittleEndian.Uint32(b[argMask:]), binary.LittleEndian.Uint32(b[arFlags:]))
		}
		for r := 0; r < n; r++ {
			if got, want := u64(a, arSrc+8*r), seg1(g).bases[r]+uint64(req.InSym.Off)+me*chunk; got != want {
				t.Fatalf("src[%d] = %#x, want chunk %d of rank %d's input %#x", r, got, me, r, want)
			}
			if got, want := u64(b, argDst+8*r), seg1(g).bases[r]+uint64(req.OutSym.Off)+me*chunk; got != want {
				t.Fatalf("dst[%d] = %#x, want chunk %d of rank %d's output %#x", r, got, me, r, want)
			}
		}
	}
}

// TestUnits: the all-gather's access width and the reductions' mode, from
// the OR of the addresses a launch touches.
func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		or   uint64
		want uint32
	}{{0, 16}, {0x1000, 16}, {0x1008, 8}, {0x1004, 4}, {0x100c, 4}, {0x1002, 2}, {0x1001, 1}, {0x1003, 1}} {
		if got := agUnit(tc.or); got != tc.want {
			t.Errorf("agUnit(%#x) = %d, want %d", tc.or, got, tc.want)
		}
	}
	for _, tc := range []struct {
		or   uint64
		es   int
		want uint32
		ok   bool
	}{
		{0x1000, 2, 16, true}, {0x1000, 4, 16, true}, // vector mode
		{0x1002, 2, 2, true}, {0x1008, 2, 2, true}, {0x1004, 4, 4, true}, {0x1008, 4, 4, true}, // element mode
		{0x1001, 2, 0, false}, {0x1002, 4, 0, false}, // not element-aligned
	} {
		got, ok := reduceUnit(tc.or, tc.es)
		if got != tc.want || ok != tc.ok {
			t.Errorf("reduceUnit(%#x, %d) = %d, %v, want %d, %v", tc.or, tc.es, got, ok, tc.want, tc.ok)
		}
	}
}

// TestAllGatherOddSlices: any slice is served; the unit is the widest every
// address (input, every written target) allows, per rank; the grid depends
// on the slice alone.
func TestAllGatherOddSlices(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n, me   int
		count   int64 // bf16 per rank
		inPlace bool
		want    uint32
	}{
		{"aligned", 2, 1, 4096, false, 16},
		{"odd count, rank 0: aligned addresses, a tail", 2, 0, 1001, false, 16},
		{"odd count, rank 1: slot at 2002", 2, 1, 1001, false, 2},
		{"count 4 mod 8: slot 1 at 8 bytes", 4, 1, 4, false, 8},
		{"count 2 mod 4 in place, rank 3", 4, 3, 2, true, 4},
		{"one element, rank 1: slot at 2", 3, 1, 1, false, 2},
		{"one element, rank 2: slot at 4, the 2 bytes go one by one", 3, 2, 1, false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(tc.n, tc.me)
			g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
			defer g.paths.kernel.args.Free()
			req := gatherReq(g, tc.count, tc.inPlace)
			if err := g.paths.kernel.whyNot(req); err != nil {
				t.Fatal(err)
			}
			if err := g.paths.kernel.fillAllGatherArgs(g.paths.kernel.args, req); err != nil {
				t.Fatal(err)
			}
			b := g.paths.kernel.args.Bytes()
			if got := binary.LittleEndian.Uint32(b[argUnit:]); got != tc.want {
				t.Fatalf("unit %d, want %d", got, tc.want)
			}
			if got := binary.LittleEndian.Uint64(b[argSlice:]); got != uint64(2*tc.count) {
				t.Fatalf("slice %d, want %d", got, 2*tc.count)
			}
			for r := 0; r < tc.n; r++ {
				want := seg1(g).bases[r] + uint64(int64(tc.me)*2*tc.count)
				if got := binary.LittleEndian.Uint64(b[argDst+8*r:]); got != want {
					t.Fatalf("dst[%d] = %#x, want %#x", r, got, want)
				}
			}
		})
	}
	for _, c := range []struct {
		slice int64
		want  int
	}{{1, 1}, {15, 1}, {kernThreads*16*kernVecsPerThread + 1, 2}, {8<<20 - 2, 64}} {
		if got := allGatherCTAs(c.slice, kernMaxCTAs); got != c.want {
			t.Errorf("allGatherCTAs(%d) = %d, want %d", c.slice, got, c.want)
		}
	}
}

// TestReductionModes: the all-reduce kernel runs every count of every
// served type; the mode is vector when every source and the output are
// 16-byte aligned (the tail of bytes%16 is the kernel's), else element; a
// reduce-scatter's chunk me decides by its offset. Buffers not aligned to
// their elements are refused, naming the alignment.
func TestReductionModes(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		name  string
		me    int
		kind  coll.Kind
		dt    coll.DType
		count int64
		shift uint64 // bytes added to the input's and output's offsets
		want  uint32
	}{
		{"all-reduce aligned, odd count", 1, coll.AllReduce, coll.BFloat16, 361, 0, 16},
		{"all-reduce one element", 0, coll.AllReduce, coll.Float32, 1, 0, 16},
		{"all-reduce at an odd element", 2, coll.AllReduce, coll.Float16, 4015, 2, 2},
		{"all-reduce f32 at 8 bytes", 2, coll.AllReduce, coll.Float32, 4015, 8, 4},
		{"reduce-scatter rank 0 (chunk at 0)", 0, coll.ReduceScatter, coll.BFloat16, 361, 0, 16},
		{"reduce-scatter rank 1 (chunk at 722)", 1, coll.ReduceScatter, coll.BFloat16, 361, 0, 2},
		{"reduce-scatter rank 2 (chunk at 2 x 1444)", 2, coll.ReduceScatter, coll.Float32, 361, 0, 4},
		{"reduce-scatter rank 2 of 8-element chunks", 2, coll.ReduceScatter, coll.BFloat16, 8, 0, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(n, tc.me)
			g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
			defer g.paths.kernel.args.Free()
			var req backend.Request
			if tc.kind == coll.AllReduce {
				req = arReq(g, tc.count, tc.dt, false)
			} else {
				req = rsReq(g, tc.count)
				req.DType = tc.dt
				req = req.Shaped(n, tc.me)
				es := int64(tc.dt.Size())
				req.Out.Len, req.In.Len = tc.count*es, tc.count*es*n
			}
			req.In.Ptr += tc.shift
			req.InSym.Off += int64(tc.shift)
			req.Out.Ptr += tc.shift
			req.OutSym.Off += int64(tc.shift)
			if err := g.paths.kernel.whyNot(req); err != nil {
				t.Fatal(err)
			}
			if err := g.paths.kernel.fillReduction(req); err != nil {
				t.Fatal(err)
			}
			b := g.paths.kernel.args.Bytes()
			if got := binary.LittleEndian.Uint32(b[argUnit:]); got != tc.want {
				t.Fatalf("unit %d, want %d", got, tc.want)
			}
			if got, want := binary.LittleEndian.Uint64(b[arBytes:]), uint64(tc.count*int64(tc.dt.Size())); got != want {
				t.Fatalf("bytes %d, want %d", got, want)
			}
		})
	}
	g := fakeGroup(n, 1)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	bad := arReq(g, 100, coll.Float32, false)
	bad.Out.Ptr += 2
	for _, err := range []error{g.paths.kernel.whyNot(bad), g.paths.twoShot.whyNot(bad), g.paths.lc.whyNot(bad)} {
		if !errors.Is(err, errKernelAlign) {
			t.Errorf("f32 output at 2 bytes: %v, want errKernelAlign", err)
		}
	}
}

// TestReductionHeldOddCounts: in-place all-reduces keep their results until
// the peers have read; any count up to arMaxBytes qualifies, in both modes.
func TestReductionHeldOddCounts(t *testing.T) {
	g := fakeGroup(3, 1)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	for _, count := range []int64{1, 3, 361, 4015, arMaxBytes/2 - 1} {
		req := arReq(g, count, coll.BFloat16, true)
		if err := g.paths.kernel.whyNot(req); err != nil {
			t.Fatalf("%d: %v", count, err)
		}
		if err := g.paths.kernel.fillReduction(req); err != nil {
			t.Fatal(err)
		}
		if f := binary.LittleEndian.Uint32(g.paths.kernel.args.Bytes()[arFlags:]); f&arFlagDirect != 0 {
			t.Fatalf("%d: in-place stored at once", count)
		}
	}
	if err := g.paths.kernel.whyNot(arReq(g, arMaxBytes/2+1, coll.BFloat16, true)); !errors.Is(err, errKernelOp) {
		t.Fatalf("in place over arMaxBytes: %v", err)
	}
}

// TestAllReduceSplit: chunks of ceil(count/n) rounded up to whole 16-byte
// vectors; the last ones shorter or empty; divisible counts as before.
func TestAllReduceSplit(t *testing.T) {
	for _, tc := range []struct {
		count int64
		n, es int
		want  int64
	}{
		{1 << 20, 4, 2, 1 << 18}, // divisible into whole vectors: unchanged
		{1 << 20, 2, 4, 1 << 19},
		{1, 2, 2, 8},
		{3, 4, 4, 4},
		{361, 3, 2, 128},
		{4015, 4, 4, 1004},
		{1<<20 + 1, 3, 2, 349528},
		{24, 3, 2, 8},
	} {
		got := allReduceSplit(tc.count, tc.n, tc.es)
		if got != tc.want || got*int64(tc.es)%kernAlign != 0 || got*int64(tc.n) < tc.count {
			t.Errorf("allReduceSplit(%d, %d, %d) = %d, want %d", tc.count, tc.n, tc.es, got, tc.want)
		}
	}
	// Every rank's part: offsets r x chunk clipped to the tensor, lengths
	// adding up to it.
	for _, count := range []int64{1, 3, 361, 4015, 1<<20 + 1} {
		for n := 2; n <= 4; n++ {
			var sum int64
			for me := 0; me < n; me++ {
				g := fakeGroup(n, me)
				req := arReq(g, count, coll.BFloat16, false)
				chunk, off, mine := chunkOf(req, len(g.Ranks), g.Me)
				if mine < 0 || mine > chunk || off != min(int64(me)*chunk, 2*count) || off+mine > 2*count {
					t.Fatalf("count %d, rank %d of %d: chunk %d off %d mine %d", count, me, n, chunk, off, mine)
				}
				sum += mine
			}
			if sum != 2*count {
				t.Fatalf("count %d on %d ranks: chunks add up to %d bytes, want %d", count, n, sum, 2*count)
			}
		}
	}
}

// TestTwoShotOddCounts: a count not divisible by n: rank r reduces and
// pushes [r x chunk, min((r+1) x chunk, count)); a rank past the end
// launches both kernels with 0 bytes (it takes part in every signal round);
// both grids come from the common chunk; the digest is the outer
// call's on every rank.
func TestTwoShotOddCounts(t *testing.T) {
	const n, count = 4, 3 // bf16: chunks of 8 elements, rank 0 owns all three
	var hashes []uint32
	for me := 0; me < n; me++ {
		g := fakeGroup(n, me)
		g.paths.kernel.args, g.paths.twoShot.second = cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes)
		req := arReq(g, count, coll.BFloat16, me%2 == 0)
		req.Record[1] = 77
		if err := g.paths.twoShot.whyNot(req); err != nil {
			t.Fatal(err)
		}
		chunk, err := g.paths.twoShot.fill(req)
		if err != nil {
			t.Fatal(err)
		}
		if chunk != 16 {
			t.Fatalf("chunk %d, want 16 bytes", chunk)
		}
		a, b := g.paths.kernel.args.Bytes(), g.paths.twoShot.second.Bytes()
		want := uint64(0)
		if me == 0 {
			want = 6
		}
		off := min(uint64(me)*16, 6)
		if le64(a, arBytes) != want || le64(b, argSlice) != want {
			t.Fatalf("rank %d: reduces %d, pushes %d bytes, want %d", me, le64(a, arBytes), le64(b, argSlice), want)
		}
		if le64(a, arOut) != req.Out.Ptr+off || le64(b, argIn) != req.Out.Ptr+off {
			t.Fatalf("rank %d: out %#x in %#x, want chunk at %d", me, le64(a, arOut), le64(b, argIn), off)
		}
		for r := 0; r < n; r++ {
			if got, want := le64(b, argDst+8*r), seg1(g).bases[r]+uint64(req.OutSym.Off)+off; got != want {
				t.Fatalf("rank %d: dst[%d] = %#x, want %#x", me, r, got, want)
			}
		}
		hashes = append(hashes, binary.LittleEndian.Uint32(a[argHash:]), binary.LittleEndian.Uint32(b[argHash:]))
		g.paths.kernel.args.Free()
		g.paths.twoShot.second.Free()
	}
	for _, h := range hashes {
		if h != hashes[0] {
			t.Fatalf("digests differ between ranks or launches: %v", hashes)
		}
	}
}

// ptxOf is the PTX of kernel id's file.
func ptxOf(t *testing.T, id kernelID) string {
	t.Helper()
	b, err := ptxFiles.ReadFile("ptx/" + kernelEntries[id].ptx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestKernelsDeclared: every kernel's file is embedded and declares its
// entry point, and every embedded file has a kernel the backend loads.
func TestKernelsDeclared(t *testing.T) {
	files := map[string]bool{}
	for id, e := range kernelEntries {
		if !strings.Contains(ptxOf(t, kernelID(id)), ".entry "+e.name+"(") {
			t.Errorf("ptx/%s has no entry %s", e.ptx, e.name)
		}
		files[e.ptx] = true
	}
	all, err := ptxFiles.ReadDir("ptx")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if !files[f.Name()] {
			t.Errorf("ptx/%s: no kernel of it is declared (declareKernel)", f.Name())
		}
	}
}
