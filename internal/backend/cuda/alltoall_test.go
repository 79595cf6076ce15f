package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// a2aReq is an all-to-all of float32 on a fake group: the output at
// offset 0 of segment 1 (registered), the input in ordinary memory. m nil:
// equal blocks of count elements; else host splits from row me of m.
func a2aReq(g *Group, count int64, m [][]int64) backend.Request {
	n, me := len(g.Ranks), g.Me
	req := backend.Request{Kind: coll.AllToAll, DType: coll.Float32, Count: count,
		Out: coll.Span{Ptr: seg1(g).bases[me]}, OutSym: backend.Sym{OK: true, Seg: 1},
		In: coll.Span{Ptr: a2aInBase(me)}}
	if m == nil {
		req.In.Len, req.Out.Len = count*4*int64(n), count*4*int64(n)
		return req
	}
	req.Count = 0
	req.A2A = &backend.Splits{Form: backend.SplitsHost, Send: make([]int64, n), Recv: make([]int64, n)}
	for j := range n {
		req.A2A.Send[j], req.A2A.Recv[j] = m[me][j], m[j][me]
		req.In.Len += m[me][j] * 4
		req.Out.Len += m[j][me] * 4
	}
	return req
}

// a2aInBase is rank me's input in a2aReq: ordinary memory, outside the
// fake segment.
func a2aInBase(me int) uint64 { return 0x70_0000_0000 + uint64(me)<<32 }

// a2aMatrix is an n x n count matrix: random counts up to hi, with zeros.
func a2aMatrix(rng *rand.Rand, n int, hi int64) [][]int64 {
	m := make([][]int64, n)
	for i := range m {
		m[i] = make([]int64, n)
		for j := range m[i] {
			if rng.Intn(4) > 0 {
				m[i][j] = rng.Int63n(hi + 1)
			}
		}
	}
	return m
}

// TestA2ACopyPlan runs every rank's copy-engine all-to-all program on
// model memory (each rank's input holds distinct elements) and checks every
// output element against the reference: rank j's output holds, in rank
// order, what each rank sends it.
func TestA2ACopyPlan(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	type tc struct {
		name  string
		n     int
		count int64     // equal form
		m     [][]int64 // host splits
	}
	tests := []tc{
		{name: "equal 2", n: 2, count: 3},
		{name: "equal 5", n: 5, count: 17},
		{name: "one rank", n: 1, m: [][]int64{{7}}},
		{name: "zeros", n: 3, m: [][]int64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}},
		{name: "rank 1 sends nothing", n: 4, m: [][]int64{{1, 2, 3, 4}, {0, 0, 0, 0}, {5, 0, 6, 7}, {8, 9, 0, 1}}},
		{name: "all to rank 2", n: 4, m: [][]int64{{0, 0, 5, 0}, {0, 0, 9, 0}, {0, 0, 1, 0}, {0, 0, 13, 0}}},
		{name: "diagonal only", n: 3, m: [][]int64{{4, 0, 0}, {0, 5, 0}, {0, 0, 6}}},
	}
	for i := range 20 {
		n := 2 + rng.Intn(7)
		tests = append(tests, tc{name: fmt.Sprintf("random %d (%d ranks)", i, n), n: n, m: a2aMatrix(rng, n, 40)})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			m := tc.m
			if m == nil {
				m = make([][]int64, n)
				for i := range m {
					m[i] = make([]int64, n)
					for j := range m[i] {
						m[i][j] = tc.count
					}
				}
			}
			// Model memory: in[i] and out[j] as elements; element k of
			// rank i's input is i<<20 | k.
			in, out := make([][]uint32, n), make([][]uint32, n)
			for i := range n {
				var send, recv int64
				for j := range n {
					send, recv = send+m[i][j], recv+m[j][i]
				}
				in[i] = make([]uint32, send)
				for k := range in[i] {
					in[i][k] = uint32(i)<<20 | uint32(k)
				}
				out[i] = make([]uint32, recv)
			}
			for me := range n {
				g := fakeGroup(n, me)
				var c *call
				if tc.m == nil {
					c = onStream(a2aReq(g, tc.count, nil), 7)
				} else {
					c = onStream(a2aReq(g, 0, m), 7)
					c.counts = m
				}
				if !g.paths.ce.serves(c.req) {
					t.Fatalf("rank %d: copy engines do not serve %+v: %v", me, c.req, g.paths.ce.whyNot(c.req))
				}
				if err := g.paths.ce.buildA2A(g.prog, c); err != nil {
					t.Fatalf("rank %d: %v", me, err)
				}
				peerCopies, readyWait, lastCopy, lastSignal := 0, -1, -1, -1
				for i, o := range g.prog.Ops() {
					switch o.Kind {
					case cudadrv.OpWait32:
						if readyWait < 0 {
							readyWait = i
						}
					case cudadrv.OpWrite32:
						if o.B == signalOn {
							lastSignal = i
						}
					case cudadrv.OpCopy:
						if o.C == 0 {
							t.Fatalf("rank %d: op %d copies nothing", me, i)
						}
						src := int64(o.B - a2aInBase(me))
						if src < 0 || src%4 != 0 || src/4+int64(o.C/4) > int64(len(in[me])) {
							t.Fatalf("rank %d: op %d reads %#x+%d, outside its input", me, i, o.B, o.C)
						}
						r := int((o.A - seg1(g).bases[0]) / 0x1_0000_0000)
						dst := int64(o.A - seg1(g).bases[r])
						if r < 0 || r >= n || dst%4 != 0 || dst/4+int64(o.C/4) > int64(len(out[r])) {
							t.Fatalf("rank %d: op %d writes %#x+%d, outside every output", me, i, o.A, o.C)
						}
						copy(out[r][dst/4:], in[me][src/4:src/4+int64(o.C/4)])
						if r != me {
							peerCopies++
							lastCopy = i
							if readyWait < 0 || i < readyWait {
								t.Fatalf("rank %d: peer copy (op %d) before the ready wait", me, i)
							}
						}
					}
				}
				want := 0
				for j := range n {
					if j != me && m[me][j] > 0 {
						want++
					}
				}
				if peerCopies != want {
					t.Fatalf("rank %d: %d peer copies, want %d (one per peer it sends to)", me, peerCopies, want)
				}
				if n > 1 && lastSignal < lastCopy {
					t.Fatalf("rank %d: done signalled (op %d) before the last copy (op %d)", me, lastSignal, lastCopy)
				}
			}
			for j := range n {
				var at int64
				for i := range n {
					var from int64 // where rank i's block for j starts in its input
					for k := range j {
						from += m[i][k]
					}
					for e := range m[i][j] {
						if got, w := out[j][at+e], uint32(i)<<20|uint32(from+e); got != w {
							t.Fatalf("rank %d's output element %d = rank %d's input element %d, want rank %d's element %d",
								j, at+e, got>>20, got&(1<<20-1), i, from+e)
						}
					}
					at += m[i][j]
				}
			}
		})
	}
}

// splitsBytes is rank i's part of splitMatrix's exchange for matrix m.
func splitsBytes(m [][]int64, i int) []byte {
	n := len(m)
	b := make([]byte, 16*n)
	for j := range n {
		binary.LittleEndian.PutUint64(b[8*j:], uint64(m[i][j]))
		binary.LittleEndian.PutUint64(b[8*(n+j):], uint64(m[j][i]))
	}
	return b
}

func TestCheckSplits(t *testing.T) {
	m := [][]int64{{1, 2, 3}, {0, 0, 9}, {4, 5, 0}}
	ranks := []int{10, 11, 12}
	all := [][]byte{splitsBytes(m, 0), splitsBytes(m, 1), splitsBytes(m, 2)}
	got, err := checkSplits(ranks, all, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(m) {
		t.Fatalf("matrix %v, want %v", got, m)
	}
	// Clipped to elements [2, 4) of every block.
	got, err = checkSplits(ranks, all, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[0 0 1] [0 0 2] [2 2 0]]"; fmt.Sprint(got) != want {
		t.Fatalf("clipped matrix %v, want %s", got, want)
	}
	// Rank 12 expects 6 from rank 10, which sends 3.
	binary.LittleEndian.PutUint64(all[2][8*3:], 6)
	_, err = checkSplits(ranks, all, 0, 0)
	if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), "rank 10 sends 3 elements to rank 12, but rank 12 expects 6 from rank 10") {
		t.Fatalf("mismatched counts: %v", err)
	}
	all[1] = all[1][:8]
	if _, err = checkSplits(ranks, all, 0, 0); !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), "rank 11 sent 8 bytes") {
		t.Fatalf("short counts: %v", err)
	}
}

// TestAllToAllCERefusals: copy engines take equal blocks and host split
// counts into a registered output; device split counts, an ordinary
// output and groups without peer access are refused, forced and by auto.
func TestAllToAllCERefusals(t *testing.T) {
	g := fakeGroup(3, 1)
	req := a2aReq(g, 8, nil)
	if _, a, why, err := g.paths.choose(&call{req: forced(req, coll.AlgoCE)}); err != nil || a != coll.AlgoCE {
		t.Fatalf("ce forced: %v %q %v", a, why, err)
	}
	plain := req
	plain.OutSym = backend.Sym{}
	if _, _, _, err := g.paths.choose(&call{req: forced(plain, coll.AlgoCE)}); !errors.Is(err, errs.Refused) || !errors.Is(err, errNotSymmetric) ||
		!strings.Contains(err.Error(), "writes into the peers' outputs") {
		t.Fatalf("ce forced, ordinary output: %v", err)
	}
	dev := req
	dev.A2A = &backend.Splits{Form: backend.SplitsDevice}
	if _, _, _, err := g.paths.choose(&call{req: forced(dev, coll.AlgoCE)}); !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), "symmem's all-to-all kernel reads split counts on the device") {
		t.Fatalf("ce forced, device splits: %v", err)
	}
	noCE := fakeGroup(3, 1)
	noCE.caps.ce, noCE.caps.ceWhy = false, "rank 0 runs on another host"
	if _, _, _, err := noCE.paths.choose(&call{req: forced(req, coll.AlgoCE)}); !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), "another host") {
		t.Fatalf("ce forced without peer access: %v", err)
	}
	for _, a := range []coll.Algo{coll.AlgoLL, coll.AlgoTwoShot, coll.AlgoLowContention} { // the kernel's: alltoall_kernel_test.go
		if _, _, _, err := g.paths.choose(&call{req: forced(req, a)}); !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), "not all_to_all") {
			t.Errorf("%s forced: %v", a, err)
		}
	}
}

// TestAllToAllChoice: auto takes copy engines where they serve, else NCCL
// where it has the calls, else refuses naming both; a forced nccl without
// the calls is refused; Explain names the path; Run issues the copy-engine
// program and NCCL's call.
func TestAllToAllChoice(t *testing.T) {
	full := goldenCfg{kern: true, ce: true, nccl: "full", gate: true}
	noCE := goldenCfg{nccl: "full"}
	none := goldenCfg{}
	withCalls := func(g *Group) { g.b.nccl.lib.HasSendRecv = true }
	ordinary := func(req backend.Request) backend.Request { req.OutSym = backend.Sym{}; return req }
	hostSplits := func(req backend.Request) backend.Request {
		req.A2A = &backend.Splits{Form: backend.SplitsHost, Send: []int64{3, 0}, Recv: []int64{5, 0}}
		req.Count = 0
		return req
	}
	same := func(req backend.Request) backend.Request { return req }
	for _, tc := range []struct {
		name  string
		cfg   goldenCfg
		lib   func(*Group)
		req   func(backend.Request) backend.Request
		algo  coll.Algo
		want  string // in the reason, or in the error
		fails bool
	}{
		{"symmetric output: ce", full, withCalls, same, coll.AlgoCE, "copy engines for all_to_all", false},
		{"host splits: ce", full, withCalls, hostSplits, coll.AlgoCE, "copy engines for all_to_all", false},
		{"ordinary output: nccl", full, withCalls, ordinary, coll.AlgoNCCL, "NCCL for all_to_all", false},
		{"no peer access: nccl", noCE, withCalls, same, coll.AlgoNCCL, "NCCL for all_to_all", false},
		{"NCCL without the calls", full, func(*Group) {}, ordinary, coll.AlgoAuto, "lacks ncclSend, ncclRecv or the group calls", true},
		{"ncclAlltoAll only, host splits", noCE, func(g *Group) { g.b.nccl.lib.HasAllToAll = true }, hostSplits, coll.AlgoAuto, "lacks ncclSend", true},
		{"ncclAlltoAll only, equal", noCE, func(g *Group) { g.b.nccl.lib.HasAllToAll = true }, same, coll.AlgoNCCL, "NCCL for all_to_all", false},
		{"neither", none, func(*Group) {}, same, coll.AlgoAuto, "NCCL unavailable", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := goldenGroup(t, tc.cfg, 2, 0)
			if g.b.nccl.lib != nil {
				lib := *g.b.nccl.lib
				g.b.nccl.lib = &lib
			}
			tc.lib(g)
			req := tc.req(a2aReq(g, 64, nil))
			req.Algo = coll.AlgoAuto
			c := newCall(req, false, g.b.nccl.version())
			_, algo, why, err := g.paths.choose(&c)
			if tc.fails {
				if err == nil || !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("auto = %s %q %v, want ErrNotSupported saying %q", algo, why, err, tc.want)
				}
				if p := g.Explain(req); !strings.Contains(p.Reason, "refused") {
					t.Fatalf("Explain = %v", p)
				}
				return
			}
			if err != nil || algo != tc.algo || !strings.Contains(why, tc.want) {
				t.Fatalf("auto = %s %q %v, want %s saying %q", algo, why, err, tc.algo, tc.want)
			}
			if p := g.Explain(req); p.Algo != tc.algo {
				t.Fatalf("Explain = %v, want %s", p, tc.algo)
			}
		})
	}
	g, _ := goldenGroup(t, full, 2, 0)
	req := hostSplits(a2aReq(g, 0, nil))
	req.Algo = coll.AlgoNCCL
	if _, _, _, err := g.paths.choose(&call{req: req}); !errors.Is(err, errs.NotSupported) || !strings.Contains(err.Error(), "nccl requested but NCCL 2.28.9 lacks") {
		t.Fatalf("nccl forced without ncclSend: %v", err)
	}
}

// TestAllToAllRun: Run issues the copy-engine all-to-all (ready round,
// copies, done round) and hands NCCL's all-to-all to NCCL.
func TestAllToAllRun(t *testing.T) {
	g, rec := goldenGroup(t, goldenCfg{ce: true, nccl: "full"}, 2, 1)
	lib := *g.b.nccl.lib
	lib.HasAllToAll = true
	g.b.nccl.lib = &lib
	req := a2aReq(g, 64, nil)
	req.Algo = coll.AlgoCE
	p, err := g.Run(context.Background(), req)
	if err != nil || p.Algo != coll.AlgoCE {
		t.Fatalf("Run = %v, %v", p, err)
	}
	out := rec.w.String()
	// Block 0 of this rank (1) goes to rank 0's output at block 1; block 1
	// is the local copy.
	peer := fmt.Sprintf("copy s=%#x dst=%#x src=%#x n=256", uint64(ownStream), seg1(g).bases[0]+256, a2aInBase(1))
	local := fmt.Sprintf("dst=%#x src=%#x n=256", seg1(g).bases[1]+256, a2aInBase(1)+256)
	if !strings.Contains(out, peer) || !strings.Contains(out, local) {
		t.Fatalf("program lacks the peer copy %q or the local copy %q:\n%s", peer, local, out)
	}
	rec.w.Reset()
	req.Algo, req.OutSym = coll.AlgoAuto, backend.Sym{}
	if p, err := g.Run(context.Background(), req); err != nil || p.Algo != coll.AlgoNCCL {
		t.Fatalf("Run (ordinary output) = %v, %v; want nccl", p, err)
	}
	if !strings.Contains(rec.w.String(), "nccl comm=plain win=false") {
		t.Fatalf("NCCL's call not made:\n%s", rec.w.String())
	}
}

// TestAllToAllRunSplitsMismatch: host split counts that disagree fail Run
// with ErrMismatch before anything is issued (one rank: the exchange needs
// no store).
func TestAllToAllRunSplitsMismatch(t *testing.T) {
	g, rec := goldenGroup(t, goldenCfg{ce: true}, 1, 0)
	req := a2aReq(g, 0, [][]int64{{3}})
	req.A2A.Recv = []int64{5}
	req.Algo = coll.AlgoCE
	_, err := g.Run(context.Background(), req)
	if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), "rank 0 sends 3 elements to rank 0, but rank 0 expects 5") {
		t.Fatalf("Run = %v, want ErrMismatch naming both counts", err)
	}
	if rec.w.Len() != 0 {
		t.Fatalf("a refused call issued:\n%s", rec.w.String())
	}
	req.A2A.Recv = []int64{3}
	if p, err := g.Run(context.Background(), req); err != nil || p.Algo != coll.AlgoCE {
		t.Fatalf("Run = %v, %v", p, err)
	}
	if want := fmt.Sprintf("copy s=%#x dst=%#x src=%#x n=12", uint64(0x100), seg1(g).bases[0], a2aInBase(0)); !strings.Contains(rec.w.String(), want) {
		t.Fatalf("program lacks the local copy %q:\n%s", want, rec.w.String())
	}
}
