package cuda

import (
	"context"
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
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// kernA2AReq is an all-to-all of count float32 per peer in form f on rank me
// of g: output at segment 1's start, input 512 MiB in (sym "o": the output
// registered, the input ordinary memory).
func kernA2AReq(g *Group, f backend.SplitForm, count int64, sym string) backend.Request {
	n, me := len(g.Ranks), g.Me
	base := seg1(g).bases[me]
	bytes := count * 4 * int64(n)
	req := backend.Request{Kind: coll.AllToAll, DType: coll.Float32, Algo: coll.AlgoKernel,
		Out: coll.Span{Ptr: base, Len: bytes}, OutSym: backend.Sym{OK: true, Seg: 1},
		In: coll.Span{Ptr: base + 512<<20, Len: bytes}, InSym: backend.Sym{OK: true, Seg: 1, Off: 512 << 20}}
	switch f {
	case backend.SplitsEqual:
		req.Count = count
	case backend.SplitsHost:
		req.A2A = &backend.Splits{Form: f, Send: make([]int64, n), Recv: make([]int64, n)}
		for r := range n {
			req.A2A.Send[r], req.A2A.Recv[r] = count, count
		}
	case backend.SplitsDevice:
		req.A2A = &backend.Splits{Form: f, Dev: coll.Span{Ptr: base + 1<<20, Len: 8 * int64(n)}, DevOut: coll.Span{Ptr: base + 2<<20, Len: 16 * int64(n)}}
	}
	if !strings.Contains(sym, "o") {
		req.Out.Ptr, req.OutSym = 0xE000_0000, backend.Sym{}
	}
	if !strings.Contains(sym, "i") {
		req.In.Ptr, req.InSym = 0xD000_0000, backend.Sym{}
	}
	return req.Shaped(n, me)
}

// TestA2APTXMatchesGo: the all-to-all kernel reads exactly the offsets
// fillA2A writes, declares its block's size, and its count slots lie in
// the kernels' region between the signal words and lc's words.
func TestA2APTXMatchesGo(t *testing.T) {
	src := ptxOf(t, a2aKernel)
	if !strings.Contains(src, fmt.Sprintf(".b8 P[%d]", a2aArgBytes)) || !strings.Contains(src, ".entry symmem_alltoall(") {
		t.Fatalf("the PTX does not declare symmem_alltoall with a %d-byte block", a2aArgBytes)
	}
	want := []int{argIn, argSlice, argRegion, argMe, argN, argMask, arFlags, argTimeout, argHash, argFault, argStop,
		a2aElem, a2aInCap, a2aOutCap, a2aDev, a2aDevOut}
	for r := 0; r < kernMaxRanks; r++ {
		want = append(want, argPeerRegion+8*r, argDst+8*r, a2aSend+8*r, a2aRecv+8*r)
	}
	var got []int
	for _, m := range regexp.MustCompile(`\[P\+(\d+)\]`).FindAllStringSubmatch(src, -1) {
		off, _ := strconv.Atoi(m[1])
		if !slices.Contains(got, off) {
			got = append(got, off)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("PTX reads parameter offsets %v, Go writes %v", got, want)
	}
	if a2aCounts < regionBytes || kernRegion+a2aCounts+2*a2aSlotBytes > lcWords || a2aSlotBytes != 16+16*kernMaxRanks {
		t.Fatalf("count slots at region offset %d (%d bytes each) overlap the signal words (%d bytes) or lc's words", a2aCounts, a2aSlotBytes, regionBytes)
	}
	if !strings.Contains(src, fmt.Sprintf(", %d;", a2aCounts)) {
		t.Errorf("PTX never adds the count slots' offset %d", a2aCounts)
	}
}

// TestA2AArgs: the parameter block of each form on rank 1 of 3.
func TestA2AArgs(t *testing.T) {
	for _, f := range []backend.SplitForm{backend.SplitsEqual, backend.SplitsHost, backend.SplitsDevice} {
		t.Run(f.String(), func(t *testing.T) {
			g := fakeGroup(3, 1)
			k := &g.paths.kernel
			k.a2a = cudadrv.NewArgs(a2aArgBytes)
			defer k.a2a.Free()
			req := kernA2AReq(g, f, 100, "o")
			if f == backend.SplitsHost {
				req.A2A.Send = []int64{1, 2, 3}
				req.A2A.Recv = []int64{4, 5, 6}
			}
			if err := k.fillA2A(k.a2a, req); err != nil {
				t.Fatal(err)
			}
			b := k.a2a.Bytes()
			u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
			u32 := func(off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
			form, block := map[backend.SplitForm]uint32{backend.SplitsEqual: a2aFormEqual, backend.SplitsHost: a2aFormHost, backend.SplitsDevice: a2aFormDevice}[f], uint64(0)
			if f == backend.SplitsEqual {
				block = 400
			}
			if u32(argMask) != form || u64(argSlice) != block || u64(argIn) != req.In.Ptr || u32(argMe) != 1 || u32(argN) != 3 || u32(a2aElem) != 4 || u32(arFlags) != 0 {
				t.Fatalf("header: form %d block %d in %#x me %d n %d elem %d flags %d", u32(argMask), u64(argSlice), u64(argIn), u32(argMe), u32(argN), u32(a2aElem), u32(arFlags))
			}
			if u64(a2aInCap) != uint64(req.In.Len/4) || u64(a2aOutCap) != uint64(req.Out.Len/4) {
				t.Fatalf("capacities %d %d, want %d %d", u64(a2aInCap), u64(a2aOutCap), req.In.Len/4, req.Out.Len/4)
			}
			for r := 0; r < kernMaxRanks; r++ {
				var dst, region, send, recv uint64
				if r < 3 {
					dst, region = seg1(g).bases[r], g.peers.pads[r]+kernRegion
					if f == backend.SplitsHost {
						send, recv = uint64(r+1), uint64(r+4)
					}
				}
				if u64(argDst+8*r) != dst || u64(argPeerRegion+8*r) != region || u64(a2aSend+8*r) != send || u64(a2aRecv+8*r) != recv {
					t.Fatalf("rank %d: dst %#x region %#x send %d recv %d; want %#x %#x %d %d", r,
						u64(argDst+8*r), u64(argPeerRegion+8*r), u64(a2aSend+8*r), u64(a2aRecv+8*r), dst, region, send, recv)
				}
			}
			var dev, devOut uint64
			if f == backend.SplitsDevice {
				dev, devOut = req.A2A.Dev.Ptr, req.A2A.DevOut.Ptr
			}
			if u64(a2aDev) != dev || u64(a2aDevOut) != devOut {
				t.Fatalf("dev %#x devout %#x, want %#x %#x", u64(a2aDev), u64(a2aDevOut), dev, devOut)
			}
		})
	}
}

// TestA2AKernelRuns: a forced kernel all-to-all of each form, its input
// registered or not, is one launch of the all-to-all kernel with a grid
// every rank shares; auto takes the kernel for device split counts (no
// other path reads them), not for equal blocks.
func TestA2AKernelRuns(t *testing.T) {
	const fnA2A = 0xF0A2
	// Host splits: Run swaps the counts through the store first
	// (splitMatrix), which the fake group lacks; TestA2AArgs has their block.
	for _, f := range []backend.SplitForm{backend.SplitsEqual, backend.SplitsDevice} {
		for _, sym := range []string{"io", "o"} {
			g, rec := goldenGroup(t, goldenCfg{name: "a2a", kern: true, ce: true}, 2, 0)
			g.x = rec
			g.b.kern.fns[a2aKernel] = fnA2A
			g.paths.kernel.a2a = cudadrv.NewArgs(a2aArgBytes)
			req := kernA2AReq(g, f, 1000, sym)
			p, err := g.Run(context.Background(), req)
			if err != nil || p.Algo != coll.AlgoKernel {
				t.Fatalf("%v sym=%s: Run = %v, %v", f, sym, p, err)
			}
			grid := a2aCountCTAs
			if f == backend.SplitsEqual {
				grid = allGatherCTAs(2*4000, kernMaxCTAs)
			}
			out := rec.w.String()
			if want := fmt.Sprintf("fn=%#x grid=%d block=%d", fnA2A, grid, kernThreads); strings.Count(out, "launch") != 1 || !strings.Contains(out, want) {
				t.Fatalf("%v sym=%s: program\n%s\nwant one launch with %q", f, sym, out, want)
			}
			req.Algo = coll.AlgoAuto
			p, err = g.Run(context.Background(), req)
			if f == backend.SplitsDevice && (err != nil || p.Algo != coll.AlgoKernel || !strings.Contains(p.Reason, "split counts on the device")) {
				t.Fatalf("device splits, auto: %v, %v; want the kernel", p, err)
			}
			if f == backend.SplitsEqual && err == nil && p.Algo == coll.AlgoKernel {
				t.Fatalf("equal blocks, auto: ran on the kernel, which auto takes only for device split counts")
			}
			g.paths.kernel.a2a.Free()
		}
	}
}

// TestA2AKernelRefusals: a forced kernel all-to-all needs the kernels, a
// registered output, and whole blocks (not staged rounds).
func TestA2AKernelRefusals(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "a2a", kern: true, ce: true}, 2, 0)
	g.paths.kernel.a2a = cudadrv.NewArgs(a2aArgBytes)
	defer g.paths.kernel.a2a.Free()
	window := kernA2AReq(g, backend.SplitsHost, 10, "io")
	window.A2A.Lo, window.A2A.Hi = 0, 5
	for _, tc := range []struct {
		name string
		req  backend.Request
		is   error
		says string
	}{
		{"output not registered", kernA2AReq(g, backend.SplitsEqual, 10, "i"), errNotSymmetric, "writes into the peers' outputs"},
		{"device splits, output not registered", kernA2AReq(g, backend.SplitsDevice, 10, "i"), errNotSymmetric, "must be a pool block registered"},
		{"staged rounds", window, errs.NotSupported, "not staged rounds of them (elements [0, 5))"},
	} {
		err := g.paths.kernel.refuse(call{req: tc.req})
		if !errors.Is(err, errs.Refused) || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want ErrRefused and %v saying %q", tc.name, err, tc.is, tc.says)
		}
	}
	g.paths.kernel.a2a.Free()
	g.paths.kernel.a2a, g.caps.kernWhy = nil, "no kernels here"
	if err := g.paths.kernel.refuse(call{req: kernA2AReq(g, backend.SplitsEqual, 10, "io")}); !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), "no kernels here") {
		t.Errorf("without kernels: %v", err)
	}
}

// kernBlock is one block a rank sends: elements from offset src of its
// input to offset dst of the target's output.
type kernBlock struct{ src, dst, count int64 }

// a2aPlan is what the kernel computes (alltoall.ptx: planCounts) from the
// count matrix (counts[i][j]: elements rank i sends rank j) for rank me:
// its block for each rank, and splitsOut (the elements received from each
// rank, then their offsets).
func a2aPlan(counts [][]int64, me int) (blocks []kernBlock, splitsOut []int64) {
	n := len(counts)
	blocks, splitsOut = make([]kernBlock, n), make([]int64, 2*n)
	var src, off int64
	for k := range n {
		var dst int64
		for i := range me {
			dst += counts[i][k]
		}
		blocks[k] = kernBlock{src: src, dst: dst, count: counts[me][k]}
		src += counts[me][k]
		splitsOut[k], splitsOut[n+k] = counts[k][me], off
		off += counts[k][me]
	}
	return blocks, splitsOut
}

// a2aCheckCounts is the kernel's check of the count matrix (alltoall.ptx:
// checkCounts; device form: capacities inCap and outCap per rank, in
// elements; host form: recv[j][i] is what rank j expects from rank i), as
// the report it writes: ok is false and rep the first fault, in the
// kernel's order.
func a2aCheckCounts(counts, recv [][]int64, inCap, outCap []int64) (rep faultReport, ok bool) {
	bad := func(what uint32, i, j int, x, y int64) (faultReport, bool) {
		return faultReport{kind: kindSplits, mine: what, peer: i, theirs: uint32(j), x: uint64(x), y: uint64(y)}, false
	}
	n := len(counts)
	if recv != nil {
		for i := range n {
			for j := range n {
				if counts[i][j] != recv[j][i] {
					return bad(splitsDiffer, i, j, counts[i][j], recv[j][i])
				}
			}
		}
		return rep, true
	}
	for i := range n {
		var sum int64
		for j := range n {
			c := counts[i][j]
			switch {
			case c < 0:
				return bad(splitsNegative, i, j, c, 0)
			case c > inCap[i]:
				return bad(splitsIn, i, j, c, inCap[i])
			}
			if sum += c; sum > inCap[i] {
				return bad(splitsIn, i, j, sum, inCap[i])
			}
		}
	}
	for i := range n {
		var sum int64
		for j := range n {
			sum += counts[j][i]
		}
		if sum > outCap[i] {
			return bad(splitsOut, i, 0, sum, outCap[i])
		}
	}
	return rep, true
}

// TestA2APlan: the kernel's plan (alltoall.ptx: planCounts) in Go, per
// rank: blocks packed in rank order in the input, at the sum of the lower
// ranks' counts in the target's output; splitsOut is the column and its
// running sum.
func TestA2APlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts [][]int64
		me     int
		blocks []kernBlock
		out    []int64
	}{
		{"zeros", [][]int64{{0, 0}, {0, 0}}, 1, []kernBlock{{0, 0, 0}, {0, 0, 0}}, []int64{0, 0, 0, 0}},
		{"equal", [][]int64{{2, 2, 2}, {2, 2, 2}, {2, 2, 2}}, 1,
			[]kernBlock{{0, 2, 2}, {2, 2, 2}, {4, 2, 2}}, []int64{2, 2, 2, 0, 2, 4}},
		{"one rank sends nothing", [][]int64{{1, 2, 3}, {0, 0, 0}, {4, 5, 6}}, 2,
			[]kernBlock{{0, 1, 4}, {4, 2, 5}, {9, 3, 6}}, []int64{3, 0, 6, 0, 3, 3}},
		{"the rank that sends nothing", [][]int64{{1, 2, 3}, {0, 0, 0}, {4, 5, 6}}, 1,
			[]kernBlock{{0, 1, 0}, {0, 2, 0}, {0, 3, 0}}, []int64{2, 0, 5, 0, 2, 2}},
		{"all to one peer", [][]int64{{0, 7, 0}, {0, 3, 0}, {0, 5, 0}}, 2,
			[]kernBlock{{0, 0, 0}, {0, 10, 5}, {5, 0, 0}}, []int64{0, 0, 0, 0, 0, 0}},
		{"all to one peer, at the peer", [][]int64{{0, 7, 0}, {0, 3, 0}, {0, 5, 0}}, 1,
			[]kernBlock{{0, 0, 0}, {0, 7, 3}, {3, 0, 0}}, []int64{7, 3, 5, 0, 7, 10}},
	} {
		blocks, out := a2aPlan(tc.counts, tc.me)
		if !slices.Equal(blocks, tc.blocks) || !slices.Equal(out, tc.out) {
			t.Errorf("%s: plan %v, splitsOut %v; want %v, %v", tc.name, blocks, out, tc.blocks, tc.out)
		}
	}
}

// TestA2ACheckCounts: the kernel's check of the matrix (alltoall.ptx:
// checkCounts) in Go, and the error each report becomes.
func TestA2ACheckCounts(t *testing.T) {
	caps := []int64{10, 10, 10}
	for _, tc := range []struct {
		name          string
		counts, recv  [][]int64
		inCap, outCap []int64
		ok            bool
		is            error
		says          string
	}{
		{"host, agreed", [][]int64{{1, 2, 0}, {3, 0, 0}, {0, 0, 0}}, [][]int64{{1, 3, 0}, {2, 0, 0}, {0, 0, 0}}, nil, nil, true, nil, ""},
		{"host, differ", [][]int64{{1, 2, 0}, {3, 0, 0}, {0, 0, 0}}, [][]int64{{1, 3, 0}, {4, 0, 0}, {0, 0, 0}}, nil, nil, false,
			errs.Mismatch, "rank 0 sends 2 elements to rank 1, but rank 1 expects 4 from rank 0"},
		{"device, zeros", [][]int64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, nil, caps, caps, true, nil, ""},
		{"device, full", [][]int64{{4, 3, 3}, {3, 4, 3}, {3, 3, 4}}, nil, caps, caps, true, nil, ""},
		{"device, negative", [][]int64{{1, 0, 0}, {0, -2, 0}, {0, 0, 0}}, nil, caps, caps, false,
			errs.Invalid, "rank 1's split count for rank 1 is -2"},
		{"device, past in", [][]int64{{4, 4, 4}, {0, 0, 0}, {0, 0, 0}}, nil, caps, caps, false,
			errs.Invalid, "rank 0's split counts reach 12 elements, but its in holds 10"},
		{"device, one count past in", [][]int64{{0, 0, 0}, {0, 11, 0}, {0, 0, 0}}, nil, caps, caps, false,
			errs.Invalid, "rank 1's split counts reach 11 elements, but its in holds 10"},
		{"device, all to one peer past out", [][]int64{{0, 0, 4}, {0, 0, 4}, {0, 0, 3}}, nil, caps, caps, false,
			errs.Invalid, "rank 2 would receive 11 elements, but its out holds 10"},
	} {
		rep, ok := a2aCheckCounts(tc.counts, tc.recv, tc.inCap, tc.outCap)
		if ok != tc.ok {
			t.Errorf("%s: ok = %v, report %+v", tc.name, ok, rep)
			continue
		}
		if ok {
			continue
		}
		g := fakeGroup(3, 0)
		err := g.faults.splitsErr(rep)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.is, tc.says)
		}
	}
}

// TestA2ASplitsReport: a split-count report in the fault words (both u64
// values across two words each) becomes the error at the next look, and
// leaves the group usable.
func TestA2ASplitsReport(t *testing.T) {
	if !onFakeCUDA(t, "") {
		return
	}
	b := fakeBackend(t)
	g, _ := goldenGroup(t, goldenCfg{name: "a2a", kern: true, ce: true}, 2, 0)
	w, err := cudadrv.NewHostMapped(b.ctx, faultWords)
	if err != nil {
		t.Fatal(err)
	}
	g.faults.words = w
	const x, y = 5<<32 | 7, 3<<32 | 1
	w.Store(faultPeer, 1)
	w.Store(faultMine, splitsOut)
	w.Store(faultEpoch, 9)
	w.Store(faultKind, kindSplits)
	w.Store(faultX, x&0xffffffff)
	w.Store(faultX+1, x>>32)
	w.Store(faultY, y&0xffffffff)
	w.Store(faultY+1, y>>32)
	w.Store(faultSet, 1<<31|9)
	err = g.Fault()
	if want := fmt.Sprintf("rank 1 would receive %d elements, but its out holds %d", int64(x), int64(y)); !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Fault = %v, want ErrInvalid saying %q", err, want)
	}
	if g.broken != nil || g.Fault() != nil {
		t.Fatalf("after the report: broken %v, Fault %v", g.broken, g.Fault())
	}
}

// TestA2ADeviceSplitsWithoutKernels: split counts on the device where
// symmem's kernels cannot run are refused, auto or forced, with every
// path's reason: the kernel's (why it is unavailable) and the others'
// (they read host counts only).
func TestA2ADeviceSplitsWithoutKernels(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "a2a", ce: true}, 2, 0)
	for _, a := range []coll.Algo{coll.AlgoAuto, coll.AlgoKernel, coll.AlgoCE} {
		req := kernA2AReq(g, backend.SplitsDevice, 10, "io")
		req.Algo = a
		_, err := g.Run(context.Background(), req)
		says := map[coll.Algo]string{
			coll.AlgoAuto:   "split counts on the device are read by symmem's all-to-all kernel alone: the kernels are unavailable (rank 0 cannot load it)",
			coll.AlgoKernel: "the kernels are unavailable (rank 0 cannot load it)",
			coll.AlgoCE:     "copy engines take host split counts only (symmem's all-to-all kernel reads split counts on the device)",
		}[a]
		if !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want ErrNotSupported saying %q", a, err, says)
		}
	}
}
