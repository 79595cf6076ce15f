package cuda

import (
	"encoding/binary"
	"errors"
	"math/rand"
	"slices"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/wait"
)

// fakeGroup is a 2..n-rank group with fake handles and peer addresses: the
// program builder and the algorithm choice are pure and run without a GPU.
func fakeGroup(n, me int) *Group {
	g := &Group{core: core{Head: members.Head{GroupName: "t", Ranks: make([]int, n), Me: me, Timeout: wait.DefaultTimeout},
		b: &Backend{ctx: &cudadrv.Context{}, watchdog: DefaultWatchdog}, caps: caps{ce: true},
		prog: cudadrv.NewProgram(64), peers: peerTable{pads: make([]uint64, n), pad: &segment{size: padBytes(n, 2<<20)}}, x: nopExec{}}}
	for r := range g.Ranks {
		g.Ranks[r] = r
		g.peers.pads[r] = uint64(0xA000_0000 + r*0x1000_0000)
	}
	g.st.h = handles{side: []uint64{11, 12, 13}, joins: []uint64{21, 22, 23}, fork: 31, forkX: 32, last: 33}
	g.faults, g.hs = faults{g: &g.core}, checkedHandshake{g: &g.core}
	g.paths.init(&g.core)
	ps := &peerSeg{size: 1 << 30, bases: make([]uint64, n)}
	for r := range ps.bases {
		ps.bases[r] = uint64(0x1_0000_0000 * (r + 1))
	}
	g.peers.segs.Add(1, ps)
	return g
}

// onStream is req as a call on stream s (not published at a gate).
func onStream(req backend.Request, s uint64) *call {
	req.Stream = s
	return &call{req: req}
}

// gatherReq is an all-gather of count bf16 per rank in segment 1: output at
// offset 0, input (out-of-place) at offset 512 MiB.
func gatherReq(g *Group, count int64, inPlace bool) backend.Request {
	me := g.Me
	slice := count * 2
	out := seg1(g).bases[me]
	req := backend.Request{Kind: coll.AllGather, DType: coll.BFloat16, Count: count,
		Out: coll.Span{Ptr: out, Len: slice * int64(len(g.Ranks))}, OutSym: backend.Sym{OK: true, Seg: 1, Off: 0}}
	if inPlace {
		req.In = coll.Span{Ptr: out + uint64(int64(me)*slice), Len: slice}
		req.InSym = backend.Sym{OK: true, Seg: 1, Off: int64(me) * slice}
	} else {
		req.In = coll.Span{Ptr: out + 512<<20, Len: slice}
		req.InSym = backend.Sym{OK: true, Seg: 1, Off: 512 << 20}
	}
	return req.Shaped(len(g.Ranks), me)
}

func TestBuildAllGatherProtocol(t *testing.T) {
	tests := []struct {
		name    string
		n, me   int
		count   int64
		inPlace bool
		pull    bool // ordinary output, registered input: pull
		copies  int  // copies to/from peers
		local   bool
	}{
		{"2 ranks in-place push", 2, 0, 1 << 20, true, false, 1, false},
		{"2 ranks out-of-place small", 2, 1, 1001, false, false, 1, true},
		{"2 ranks out-of-place big, side local", 2, 0, 64 << 20, false, false, 1, true},
		{"2 ranks pull into ordinary output", 2, 1, 4097, false, true, 1, true},
		{"4 ranks push", 4, 2, 12345, false, false, 1, true},
		{"4 ranks pull", 4, 3, 12345, false, true, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(tc.n, tc.me)
			req := gatherReq(g, tc.count, tc.inPlace)
			if tc.pull {
				req.OutSym = backend.Sym{}
			}
			const s = 7
			if err := g.paths.ce.build(g.prog, onStream(req, s)); err != nil {
				t.Fatal(err)
			}
			ops := g.prog.Ops()
			slice := uint64(tc.count * 2)
			own := func(a uint64) bool { return a >= g.peers.pads[tc.me] && a < g.peers.pads[tc.me]+0x1000 }
			var signals, resets, waits, copies, localCopies int
			var moved uint64
			readyWaitAt, firstPeerCopy, doneWriteAt := -1, -1, -1
			for i, o := range ops {
				switch o.Kind {
				case cudadrv.OpWrite32:
					switch {
					case o.B == signalOn && !own(o.A):
						signals++
						if from := int((o.A - g.peers.pads[0]) % 0x1000_0000 / 4 % uint64(tc.n)); from != tc.me {
							t.Fatalf("op %d signals in the word of rank %d, want its own (%d)", i, from, tc.me)
						}
						if readyWaitAt >= 0 && doneWriteAt < 0 {
							doneWriteAt = i
						}
					case o.B == 0 && own(o.A):
						resets++
					default:
						t.Fatalf("op %d writes %d at %#x: want 1 in a peer's pad or 0 in its own", i, o.B, o.A)
					}
				case cudadrv.OpWait32:
					waits++
					if o.B != signalOn || o.Flags != cudadrv.WaitEQ {
						t.Fatalf("op %d waits for %d (flags %d), want == %d", i, o.B, o.Flags, signalOn)
					}
					if !own(o.A) {
						t.Fatalf("op %d waits on %#x, outside this rank's pad", i, o.A)
					}
					if readyWaitAt < 0 {
						readyWaitAt = i
					}
				case cudadrv.OpCopy:
					dst := o.A
					if dst >= req.Out.Ptr+uint64(tc.me)*slice && dst < req.Out.Ptr+uint64(tc.me+1)*slice && o.B == req.In.Ptr {
						localCopies++
						continue
					}
					copies++
					moved += o.C
					if firstPeerCopy < 0 {
						firstPeerCopy = i
					}
					if readyWaitAt < 0 || i < readyWaitAt {
						t.Fatalf("peer copy (op %d) issued before the ready wait", i)
					}
				}
			}
			if signals != 2*(tc.n-1) || waits != 2*(tc.n-1) || resets != 2*(tc.n-1) {
				t.Fatalf("%d signals, %d waits, %d resets, want %d each", signals, waits, resets, 2*(tc.n-1))
			}
			if copies != tc.copies*(tc.n-1) {
				t.Fatalf("%d peer copies, want %d", copies, tc.copies*(tc.n-1))
			}
			if moved != slice*uint64(tc.n-1) {
				t.Fatalf("peer copies move %d bytes, want %d", moved, slice*uint64(tc.n-1))
			}
			if (localCopies == 1) != tc.local {
				t.Fatalf("local copies %d, want local=%v", localCopies, tc.local)
			}
			if doneWriteAt < firstPeerCopy {
				t.Fatalf("done signal (op %d) before the copies (op %d)", doneWriteAt, firstPeerCopy)
			}
			if last := ops[len(ops)-1]; last.Stream != s {
				t.Fatalf("program does not end on the caller's stream: %+v", last)
			}
		})
	}
}

func TestBuildAllGatherNeedsRegisteredInput(t *testing.T) {
	g := fakeGroup(2, 0)
	req := gatherReq(g, 1000, false)
	req.InSym = backend.Sym{}
	if err := g.paths.ce.build(g.prog, onStream(req, 7)); err != nil {
		t.Fatalf("push with an ordinary input and a registered output: %v", err)
	}
	req.OutSym = backend.Sym{}
	if err := g.paths.ce.build(g.prog, onStream(req, 7)); !errors.Is(err, errNotSymmetric) {
		t.Fatalf("nothing registered: got %v, want errNotSymmetric", err)
	}
	req = gatherReq(g, 1000, false)
	req.OutSym = backend.Sym{} // pull
	req.InSym.Seg = 99         // not registered with the group
	if err := g.paths.ce.build(g.prog, onStream(req, 7)); !errors.Is(err, errNotSymmetric) {
		t.Fatalf("unregistered segment: got %v, want errNotSymmetric", err)
	}
}

func TestChoose(t *testing.T) {
	g := fakeGroup(2, 1)
	noCE := fakeGroup(2, 1)
	noCE.caps.ce, noCE.caps.ceWhy = false, "rank 0 runs on another host"
	sym := gatherReq(g, 1<<19, false)
	plain := sym
	plain.InSym, plain.OutSym = backend.Sym{}, backend.Sym{}
	inPlace := gatherReq(g, 1<<19, true)
	inPlace.InSym = backend.Sym{} // in-place needs only the output registered
	rs := sym
	rs.Kind = coll.ReduceScatter
	bc := sym
	bc.Kind = coll.Broadcast
	kg := fakeGroup(2, 1)
	kg.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer kg.paths.kernel.args.Free()
	ksym := gatherReq(kg, 1<<19, false) // 1 MiB slices: the kernel's range
	kodd := gatherReq(kg, 1001, false)  // 2002-byte slices: not 16-byte vectors
	kplain := ksym
	kplain.OutSym = backend.Sym{}
	kbig := gatherReq(kg, 64<<20, false)
	kin4 := gatherReq(kg, 1<<20, true) // 4 MiB in-place: NCCL windows preferred, none here
	kg3 := fakeGroup(3, 1)
	kg3.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer kg3.paths.kernel.args.Free()
	// The rules after auto's table are under test, with a fixed table
	// (goldenTable), not whatever was measured last.
	for _, x := range []*Group{g, noCE, kg, kg3} {
		x.b.table = goldenTable(t)
	}
	tests := []struct {
		name string
		g    *Group
		req  backend.Request
		algo coll.Algo
		want coll.Algo
		err  bool
	}{
		{"auto all-gather symmetric -> ce", g, sym, coll.AlgoAuto, coll.AlgoCE, false},
		{"direct is auto", g, sym, coll.AlgoDirect, coll.AlgoCE, false},
		{"auto in-place output registered -> ce", g, inPlace, coll.AlgoAuto, coll.AlgoCE, false},
		{"ce forced", g, sym, coll.AlgoCE, coll.AlgoCE, false},
		{"ce forced on plain buffers", g, plain, coll.AlgoCE, coll.AlgoCE, true},
		{"ce forced on reduce-scatter", g, rs, coll.AlgoCE, coll.AlgoCE, true},
		{"ce forced without P2P", noCE, sym, coll.AlgoCE, coll.AlgoCE, true},
		{"auto plain, no NCCL", g, plain, coll.AlgoAuto, coll.AlgoAuto, true},
		{"nccl forced, no NCCL", g, sym, coll.AlgoNCCL, coll.AlgoNCCL, true},
		{"nccl-window forced, no NCCL", g, sym, coll.AlgoNCCLWindow, coll.AlgoNCCLWindow, true},
		{"auto without P2P, no NCCL", noCE, sym, coll.AlgoAuto, coll.AlgoAuto, true},
		{"unknown algo", g, sym, coll.Algo("magic"), coll.Algo("magic"), true},
		{"auto small aligned -> kernel", kg, ksym, coll.AlgoAuto, coll.AlgoKernel, false},
		// 1.5 MiB all-reduce on 3 ranks: the table says NCCL; without NCCL
		// (ranks sharing a GPU) the kernel takes it.
		{"auto all-reduce, no NCCL -> kernel", kg3, arReq(kg3, 3<<18, coll.Float16, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto all-reduce odd, no NCCL -> kernel", kg3, arReq(kg3, 1001, coll.Float16, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto small odd -> kernel", kg, kodd, coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto big -> ce", kg, kbig, coll.AlgoAuto, coll.AlgoCE, false},
		{"kernel forced", kg, kbig, coll.AlgoKernel, coll.AlgoKernel, false},
		{"auto in-place 4 MiB without windows -> kernel", kg, kin4, coll.AlgoAuto, coll.AlgoKernel, false},
		{"kernel forced, odd slice", kg, kodd, coll.AlgoKernel, coll.AlgoKernel, false},
		{"kernel forced, output not registered", kg, kplain, coll.AlgoKernel, coll.AlgoKernel, true},
		{"kernel forced on reduce-scatter", kg, rs, coll.AlgoKernel, coll.AlgoKernel, false},
		{"kernel forced on broadcast", kg, bc, coll.AlgoKernel, coll.AlgoKernel, true},
		{"kernel forced, not loaded", g, sym, coll.AlgoKernel, coll.AlgoKernel, true},
		{"auto all-reduce 1 MiB bf16 -> kernel", kg, arReq(kg, 1<<19, coll.BFloat16, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"kernel forced all-reduce in-place f16", kg, arReq(kg, 1<<10, coll.Float16, true), coll.AlgoKernel, coll.AlgoKernel, false},
		{"kernel forced all-reduce int32", kg, arReq(kg, 1<<10, coll.Int32, false), coll.AlgoKernel, coll.AlgoKernel, true},
		{"kernel forced all-reduce avg", kg, arAvg(kg), coll.AlgoKernel, coll.AlgoKernel, false},
		{"kernel forced all-reduce max", kg, arOp(kg, coll.Max), coll.AlgoKernel, coll.AlgoKernel, true},
		{"kernel forced all-reduce 4 MiB out-of-place (stored at once)", kg, arReq(kg, 1<<21, coll.BFloat16, false), coll.AlgoKernel, coll.AlgoKernel, false},
		{"kernel forced all-reduce 4 MiB in-place (held: 2 MiB)", kg, arReq(kg, 1<<21, coll.BFloat16, true), coll.AlgoKernel, coll.AlgoKernel, true},
		{"kernel forced all-reduce odd count", kg, arReq(kg, 1001, coll.BFloat16, false), coll.AlgoKernel, coll.AlgoKernel, false},
		{"two-shot forced", kg, arReq(kg, 1<<21, coll.BFloat16, true), coll.AlgoTwoShot, coll.AlgoTwoShot, false},
		{"two-shot forced, count not divisible", kg3, arReq(kg3, 1<<10, coll.BFloat16, false), coll.AlgoTwoShot, coll.AlgoTwoShot, false},
		{"two-shot forced on reduce-scatter", kg, rsReq(kg, 1<<10), coll.AlgoTwoShot, coll.AlgoTwoShot, true},
		{"two-shot forced, not loaded", g, arReq(g, 1<<10, coll.BFloat16, false), coll.AlgoTwoShot, coll.AlgoTwoShot, true},
		{"lc forced reduce-scatter", kg, rsReq(kg, 1<<20), coll.AlgoLowContention, coll.AlgoLowContention, false},
		{"lc forced reduce-scatter, ordinary output", kg, rsPlainOut(kg), coll.AlgoLowContention, coll.AlgoLowContention, false},
		{"lc forced all-reduce", kg, arReq(kg, 1<<20, coll.Float16, false), coll.AlgoLowContention, coll.AlgoLowContention, false},
		{"lc forced all-gather", kg, ksym, coll.AlgoLowContention, coll.AlgoLowContention, true},
		{"lc forced int32", kg, arReq(kg, 1<<10, coll.Int32, false), coll.AlgoLowContention, coll.AlgoLowContention, true},
		// Without NCCL (ranks sharing a GPU): in-place all-reduce above the
		// one-shot kernel's 2 MiB goes two-shot; reduce-scatter of any size
		// runs the kernel.
		{"auto all-reduce 8 MiB in-place, no NCCL -> two-shot", kg, arReq(kg, 1<<22, coll.BFloat16, true), coll.AlgoAuto, coll.AlgoTwoShot, false},
		{"auto all-reduce 8 MiB out-of-place, no NCCL -> kernel", kg, arReq(kg, 1<<22, coll.BFloat16, false), coll.AlgoAuto, coll.AlgoKernel, false},
		{"auto all-reduce 128 MiB, no NCCL -> two-shot", kg, arReq(kg, 1<<26, coll.BFloat16, false), coll.AlgoAuto, coll.AlgoTwoShot, false},
		{"auto all-reduce 8 MiB on 3 ranks, no NCCL -> two-shot", kg3, arReq(kg3, 3<<21, coll.BFloat16, false), coll.AlgoAuto, coll.AlgoTwoShot, false},
		{"auto reduce-scatter 64 MiB, no NCCL -> kernel", kg, rsReq(kg, 1<<25), coll.AlgoAuto, coll.AlgoKernel, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Algo = tc.algo
			got, why, err := chooseReq(tc.g, req, tc.g.nccl.windowed(req))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if got != tc.want {
				t.Fatalf("algo %s, want %s", got, tc.want)
			}
			if err == nil && why == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

// arAvg is a bf16 all-reduce with the average.
func arAvg(g *Group) backend.Request { return arOp(g, coll.Avg) }

// arOp is a bf16 all-reduce of 2 KiB with op.
func arOp(g *Group, op coll.ReduceOp) backend.Request {
	r := arReq(g, 1<<10, coll.BFloat16, false)
	r.Op = op
	return r
}

// rsReq is a bf16 reduce-scatter of count elements per rank: input at
// offset 512 MiB of segment 1, output at 0.
func rsReq(g *Group, count int64) backend.Request {
	n := int64(len(g.Ranks))
	base := seg1(g).bases[g.Me]
	req := backend.Request{Kind: coll.ReduceScatter, DType: coll.BFloat16, Op: coll.Sum, Count: count,
		Out: coll.Span{Ptr: base, Len: 2 * count}, OutSym: backend.Sym{OK: true, Seg: 1, Off: 0},
		In: coll.Span{Ptr: base + 512<<20, Len: 2 * count * n}, InSym: backend.Sym{OK: true, Seg: 1, Off: 512 << 20}}
	return req.Shaped(len(g.Ranks), g.Me)
}

// rsPlainOut is rsReq with an output outside the pool.
func rsPlainOut(g *Group) backend.Request {
	r := rsReq(g, 1<<10)
	r.Out, r.OutSym = coll.Span{Ptr: 0x7000_0000, Len: r.Out.Len}, backend.Sym{}
	return r
}

func TestAutoTable(t *testing.T) {
	if err := CheckAutoTable(builtinTable, builtinTable.Machine); err != nil {
		t.Fatalf("the built-in table: %v", err)
	}
	for _, k := range []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast} {
		for _, n := range []int{1, 2, 3, 4, 8, 64} {
			for _, dt := range coll.DTypes() {
				for _, in := range []bool{false, true} {
					if _, ok := builtinTable.Pick(k, dt, n, in, false, 1<<61); !ok {
						t.Fatalf("%v %v n=%d in-place %v: the built-in table has no row for huge sizes", k, dt, n, in)
					}
				}
			}
		}
	}
}

// TestAutoOrders: every path the table names has a fallback order, and
// every order ends in NCCL's turn, whose last step always holds (auto
// never runs out of steps).
func TestAutoOrders(t *testing.T) {
	for _, a := range builtinTable.Algos() {
		if r := pathRow(a); r == nil || len(r.fallback) == 0 {
			t.Errorf("the built-in table's %s has no fallback order", a)
		}
	}
	for _, r := range pathTable {
		a, order := r.algo, r.fallback
		if order == nil {
			continue
		}
		if order[0] != a || order[len(order)-1] != coll.AlgoNCCL {
			t.Errorf("%s's order %v: want it first and nccl last", a, order)
		}
		for _, turn := range order {
			if tr := pathRow(turn); tr == nil || len(tr.turn) == 0 {
				t.Errorf("%s's order: %s has no turn", a, turn)
			}
		}
		for _, s := range r.order {
			if slices.Contains(s.when, pathServes) && (s.row < 0 || pathTable[s.row].serves == nil) {
				t.Errorf("%s's order: a step of %s asks whether it serves, and its row has no serves", a, s.algo)
			}
		}
	}
	steps := pathRow(coll.AlgoNCCL).turn
	if last := steps[len(steps)-1]; len(last.when) != 0 || last.algo != coll.AlgoNCCL {
		t.Errorf("NCCL's turn ends with %+v, want plain NCCL unconditionally", last)
	}
}

func TestProviderRejectsBadInput(t *testing.T) {
	p := newProvider(&cudadrv.Context{}, 2<<20)
	for _, size := range []int64{0, -1, 4096, 3 << 20} {
		if _, err := p.CreateSegment(1, size); err == nil {
			t.Errorf("CreateSegment(%d) succeeded", size)
		}
	}
	if err := p.ReleaseSegment(7); err == nil {
		t.Error("ReleaseSegment of an unknown segment succeeded")
	}
	if _, _, err := p.fd(7); err == nil {
		t.Error("fd of an unknown segment succeeded")
	}
	if p.Granularity() != 2<<20 || p.Len() != 0 {
		t.Errorf("granularity %d, len %d", p.Granularity(), p.Len())
	}
}

// runSignalModel replays the signal operations of every rank's program for
// several calls under one random interleaving (program order per rank, as
// on a stream; words shared by address). It fails on a deadlock and returns
// how many waits were released by a signal of another call than their own.
func runSignalModel(t *testing.T, n, calls int, seed int64, dropResets bool) int {
	t.Helper()
	progs := make([][]cudadrv.Op, n)
	for r := range progs {
		g := fakeGroup(n, r)
		if err := g.paths.ce.build(g.prog, onStream(gatherReq(g, 1000, r%2 == 0), 7)); err != nil {
			t.Fatal(err)
		}
		for _, o := range g.prog.Ops() {
			if o.Kind == cudadrv.OpWait32 || (o.Kind == cudadrv.OpWrite32 && !(dropResets && o.B == 0)) {
				progs[r] = append(progs[r], o)
			}
		}
	}
	mem, tag := map[uint64]uint32{}, map[uint64]int{}
	pc := make([]int, n) // op index over all calls
	rng := rand.New(rand.NewSource(seed))
	stale := 0
	for {
		var ready []int
		done := 0
		for r := range progs {
			if pc[r] == calls*len(progs[r]) {
				done++
				continue
			}
			o := progs[r][pc[r]%len(progs[r])]
			if o.Kind == cudadrv.OpWrite32 || mem[o.A] == uint32(o.B) {
				ready = append(ready, r)
			}
		}
		if done == n {
			return stale
		}
		if len(ready) == 0 {
			t.Fatalf("n=%d seed %d: deadlock at ops %v", n, seed, pc)
		}
		r := ready[rng.Intn(len(ready))]
		o, call := progs[r][pc[r]%len(progs[r])], pc[r]/len(progs[r])
		if o.Kind == cudadrv.OpWrite32 {
			mem[o.A] = uint32(o.B)
			tag[o.A] = call
		} else if tag[o.A] != call {
			stale++
		}
		pc[r]++
	}
}

// TestSignalProtocolModel: with the resets, no interleaving deadlocks or lets
// a wait pass on the previous call's signal (what makes graph replay safe);
// without them the model finds the stale release at once.
func TestSignalProtocolModel(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		for seed := int64(0); seed < 300; seed++ {
			if stale := runSignalModel(t, n, 5, seed, false); stale != 0 {
				t.Fatalf("n=%d seed %d: %d waits released by another call's signal", n, seed, stale)
			}
		}
		if runSignalModel(t, n, 5, 1, true) == 0 {
			t.Fatalf("n=%d: the model did not catch the missing resets", n)
		}
	}
}

// TestForcedRefusalsAreMarked: a forced algorithm that cannot run one call
// wraps errs.Refused (the bench then reports the row as refused);
// missing pieces (no NCCL) and unknown names do not.
func TestForcedRefusalsAreMarked(t *testing.T) {
	g := fakeGroup(2, 0)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	odd := gatherReq(g, 1001, false)
	misaligned := arReq(g, 1001, coll.BFloat16, false) // an input not aligned to its elements
	misaligned.In.Ptr++
	misaligned.InSym.Off++
	plain := gatherReq(g, 1<<19, false)
	plain.InSym, plain.OutSym = backend.Sym{}, backend.Sym{}
	big := arReq(g, 1<<21, coll.BFloat16, true)
	for _, tc := range []struct {
		name    string
		req     backend.Request
		algo    coll.Algo
		refused bool
	}{
		{"kernel, input not element-aligned", misaligned, coll.AlgoKernel, true},
		{"kernel, in-place all-reduce over 2 MiB", big, coll.AlgoKernel, true},
		{"lc, all-gather", odd, coll.AlgoLowContention, true},
		{"ce, plain buffers", plain, coll.AlgoCE, true},
		{"nccl without NCCL", odd, coll.AlgoNCCL, false},
		{"unknown algorithm", odd, coll.Algo("fast"), false},
	} {
		req := tc.req
		req.Algo = tc.algo
		_, _, err := chooseReq(g, req, g.nccl.windowed(req))
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if tc.algo == coll.AlgoLowContention {
			// The op is not served: not supported, not a refusal of this call.
			if !errors.Is(err, errs.NotSupported) {
				t.Errorf("%s: %v does not match errs.NotSupported", tc.name, err)
			}
		}
		if errors.Is(err, errs.Refused) != tc.refused {
			t.Errorf("%s: %v: refused=%v, want %v", tc.name, err, errors.Is(err, errs.Refused), tc.refused)
		}
	}
}

// BenchmarkChoose: the algorithm choice on the issue path (no driver call).
func BenchmarkChoose(b *testing.B) {
	g := fakeGroup(2, 0)
	g.paths.kernel.args = cudadrv.NewArgs(kernArgBytes)
	defer g.paths.kernel.args.Free()
	for _, c := range []struct {
		name string
		req  backend.Request
	}{
		{"all_gather 1M kernel", gatherReq(g, 1<<18, false)},
		{"all_gather odd count", gatherReq(g, 1001, false)},
		{"all_reduce 1M kernel", arReq(g, 1<<19, coll.BFloat16, false)},
		{"all_reduce 64M nccl", arReq(g, 1<<25, coll.BFloat16, false)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				chooseReq(g, c.req, g.nccl.windowed(c.req))
			}
		})
	}
}

// seg1 is segment 1 of a fake group.
func seg1(g *Group) *peerSeg {
	ps, _ := g.peers.segs.Get(1)
	return ps
}

// TestCopyEngineHandshake: in checked mode, with the kernels, a copy-engine
// collective forks
// one handshake launch carrying the call's digest and the kernels'
// shared regions onto the check stream before anything else, keeps its
// ready round of memory operations, and joins the handshake before its
// done round.
func TestCopyEngineHandshake(t *testing.T) {
	for _, inPlace := range []bool{true, false} {
		g := fakeGroup(3, 1)
		g.hs.args = cudadrv.NewArgs(kernArgBytes)
		defer g.hs.args.Free()
		g.hs.fill()
		g.b.kern.fns = make([]cudadrv.Function, len(kernelEntries))
		g.b.kern.fns[hsKernel] = 77
		g.hs.stream, g.hs.ev = 41, [2]uint64{42, 43}
		req := gatherReq(g, 4097, inPlace)
		req.Record[1] = 12345
		const s = 7
		if err := g.paths.ce.build(g.prog, onStream(req, s)); err != nil {
			t.Fatal(err)
		}
		for _, o := range g.prog.Ops() {
			if o.Kind == cudadrv.OpLaunch || o.Stream == g.hs.stream {
				t.Fatalf("in-place %v: outside checked mode the program has %+v", inPlace, o)
			}
		}
		g.prog.Reset()
		req.Checked = true
		if err := g.paths.ce.build(g.prog, onStream(req, s)); err != nil {
			t.Fatal(err)
		}
		ops := g.prog.Ops()
		want := []cudadrv.Op{{Kind: cudadrv.OpRecord, Stream: s, A: 42}, {Kind: cudadrv.OpWaitEvent, Stream: 41, A: 42},
			{Kind: cudadrv.OpLaunch, Stream: 41, A: 77, C: 1 | hsThreads<<32}, {Kind: cudadrv.OpRecord, Stream: 41, A: 43}}
		for i, w := range want {
			if o := ops[i]; o.Kind != w.Kind || o.Stream != w.Stream || o.A != w.A || (w.Kind == cudadrv.OpLaunch && o.C != w.C) {
				t.Fatalf("in-place %v: op %d is %+v, want %+v (the handshake forked first)", inPlace, i, o, w)
			}
		}
		joined, waits := -1, 0
		for i, o := range ops {
			switch {
			case o.Kind == cudadrv.OpWaitEvent && o.Stream == s && o.A == 43:
				joined = i
			case o.Kind == cudadrv.OpWait32:
				waits++
			case o.Kind == cudadrv.OpWrite32 && o.B == signalOn && waits > 2 && joined < 0:
				t.Fatalf("in-place %v: op %d signals done before the handshake is joined", inPlace, i)
			}
		}
		if joined < 0 || waits != 4 { // ready and done: one wait per peer each
			t.Errorf("in-place %v: join at %d, %d waits; want a join and 4 waits", inPlace, joined, waits)
		}
		b := g.hs.args.Bytes()
		u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }
		if want := agree.Digest(agree.Call{Record: req.Record, Path: req.Algo}); binary.LittleEndian.Uint32(b[argHash:]) != want {
			t.Errorf("digest %08x, want %08x", binary.LittleEndian.Uint32(b[argHash:]), want)
		}
		if u64(argRegion) != g.peers.pads[1]+kernRegion || u64(argPeerRegion+16) != g.peers.pads[2]+kernRegion {
			t.Errorf("regions %#x / %#x, want the pads' kernel regions", u64(argRegion), u64(argPeerRegion+16))
		}
		if binary.LittleEndian.Uint32(b[argMe:]) != 1 || binary.LittleEndian.Uint32(b[argN:]) != 3 {
			t.Errorf("me/n %d/%d, want 1/3", binary.LittleEndian.Uint32(b[argMe:]), binary.LittleEndian.Uint32(b[argN:]))
		}
	}
}

// TestCopyEngineRankLimit: a group wider than the copy-engine all-gather's
// limit is refused when the path is chosen, before the call is published
// at the gate (ranks sharing GPUs can form such groups).
func TestCopyEngineRankLimit(t *testing.T) {
	g := fakeGroup(maxCERanks+1, 0)
	req := gatherReq(g, 1<<10, false)
	req.Algo = coll.AlgoCE
	_, _, err := chooseReq(g, req, false)
	if !errors.Is(err, errs.Refused) || !errors.Is(err, errs.NotSupported) {
		t.Fatalf("forced ce on %d ranks: %v, want ErrRefused and errs.NotSupported", maxCERanks+1, err)
	}
	req.Algo = coll.AlgoAuto
	if algo, _, _ := chooseReq(g, req, false); algo == coll.AlgoCE {
		t.Fatalf("auto chose ce on %d ranks", maxCERanks+1)
	}
}
