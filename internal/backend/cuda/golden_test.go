package cuda

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"github.com/symmem/symmem/internal/tune"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/internal/wait"
	"github.com/symmem/symmem/rendezvous"
)

// The golden net: for a broad table of requests on fake groups, what the
// choice says (algorithm, reason, error text; choose and Explain) and what
// Run would issue (every program's ops, with each launch's grid and
// parameter block, every NCCL call) is written to testdata/*.golden and
// compared byte for byte (testdata/*.golden.gz). Run with -update to
// rewrite them:
//
//	go test ./internal/backend/cuda -run Golden -update
//
// Not covered (no GPU here): the driver's execution of the programs, real
// events (a caller stream's fence event is pre-seeded, handle 0), the
// kernels' fault words (no mapped host memory: argFault is 0), the gate's
// registered page (fake device addresses), approval by peers (peers never
// publish, so every gated call gets its guard), graph capture (the fake
// driver says no stream is captured), a failing Exec, and NCCL windows as
// Run decides them (a fake communicator has none: Run's golden runs with
// win=false; the choice's golden covers both).
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// goldenCfg is a fake group's configuration.
type goldenCfg struct {
	name string
	kern bool   // symmem's kernels loaded (needs ce)
	ce   bool   // every rank on this host, P2P
	nccl string // "" none, "full" windows and a window-free communicator, "noplain", "nowin"
	gate bool   // a call gate (ranks on one host)
}

// Fake handles (recorded programs name them).
const (
	fnAG, fnAR, fnLC, fnHS, fnGuard = 0xF0A6, 0xF0A7, 0xF01C, 0xF045, 0xF06A
	fnLL                            = 0xF011
	ownStream, callerStream         = 0x50, 0x60
)

var fnNames = map[uint64]string{fnAG: "allgather", fnAR: "allreduce", fnLC: "reducescatter_lc", fnHS: "handshake", fnGuard: "gate_guard", fnLL: "lowlatency"}

// recorder is the test's executor: it writes what a call would issue.
type recorder struct {
	g *Group
	w *bytes.Buffer
}

func (r *recorder) capturing(*cudadrv.Context, uint64) (bool, error) { return false, nil }

func (r *recorder) program(p *cudadrv.Program) error {
	fmt.Fprintf(r.w, "  program (%d ops)\n", p.Len())
	for _, o := range p.Ops() {
		fmt.Fprintf(r.w, "    %s\n", fmtOp(o))
	}
	return nil
}

// scratchAt is the fake address of every scratch allocation.
const scratchAt = 0x5C000000

func (r *recorder) scratch(_ *cudadrv.Context, s uint64, n int64) (uint64, error) {
	fmt.Fprintf(r.w, "  scratch %d bytes on stream %#x -> %#x\n", n, s, scratchAt)
	return scratchAt, nil
}

func (r *recorder) release(_ *cudadrv.Context, s, ptr uint64) {
	fmt.Fprintf(r.w, "  release %#x on stream %#x\n", ptr, s)
}

func (r *recorder) nccl(_ context.Context, c *bnccl.Comm, req backend.Request, win bool) (coll.Path, error) {
	which := "windows"
	if c == r.g.nccl.plain {
		which = "plain"
	}
	fmt.Fprintf(r.w, "  nccl comm=%s win=%v algo=%s\n", which, win, req.Algo)
	if win {
		return coll.Path{Algo: coll.AlgoNCCLWindow}, nil
	}
	return coll.Path{Algo: coll.AlgoNCCL}, nil
}

// ptrAt is the parameter block a launch op points at (C memory, alive while
// its Args is).
func ptrAt(a uint64) unsafe.Pointer {
	p := uintptr(a)
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}

func fmtOp(o cudadrv.Op) string {
	switch o.Kind {
	case cudadrv.OpCtx:
		return fmt.Sprintf("ctx %#x", o.A)
	case cudadrv.OpWrite32:
		return fmt.Sprintf("write32 s=%#x at=%#x v=%d", o.Stream, o.A, o.B)
	case cudadrv.OpWait32:
		return fmt.Sprintf("wait32 s=%#x at=%#x v=%d flags=%d", o.Stream, o.A, o.B, o.Flags)
	case cudadrv.OpCopy:
		return fmt.Sprintf("copy s=%#x dst=%#x src=%#x n=%d", o.Stream, o.A, o.B, o.C)
	case cudadrv.OpRecord:
		return fmt.Sprintf("record s=%#x ev=%#x", o.Stream, o.A)
	case cudadrv.OpWaitEvent:
		return fmt.Sprintf("waitevent s=%#x ev=%#x", o.Stream, o.A)
	case cudadrv.OpFence:
		return fmt.Sprintf("fence s=%#x ev=%#x", o.Stream, o.A)
	case cudadrv.OpLaunch:
		size := kernArgBytes
		if o.A == fnLL {
			size = llArgBytes
		}
		b := unsafe.Slice((*byte)(ptrAt(o.B)), size)
		var s strings.Builder
		for off := 0; off < size; off += 8 {
			if w := binary.LittleEndian.Uint64(b[off:]); w != 0 {
				fmt.Fprintf(&s, " %d:%#x", off, w)
			}
		}
		name := fnNames[o.A]
		if name == "" {
			name = fmt.Sprintf("%#x", o.A)
		}
		return fmt.Sprintf("launch s=%#x fn=%s grid=%d block=%d args[%s ]", o.Stream, name, uint32(o.C), o.C>>32, s.String())
	}
	return fmt.Sprintf("op %+v", o)
}

// goldenGroup is a fake group of n ranks (this one me) configured as c.
var goldenTableOnce struct {
	sync.Once
	tb  *tune.Table
	err error
}

// goldenTable is transcribedTable, parsed once for every golden group.
func goldenTable(t testing.TB) *tune.Table {
	t.Helper()
	goldenTableOnce.Do(func() {
		b, err := os.ReadFile("../../../results/auto/transcribed-2026-11-21.seed.json")
		if err == nil {
			goldenTableOnce.tb, err = tune.Parse(b)
		}
		goldenTableOnce.err = err
	})
	if goldenTableOnce.err != nil {
		t.Fatal(goldenTableOnce.err)
	}
	return goldenTableOnce.tb
}

func goldenGroup(t testing.TB, c goldenCfg, n, me int) (*Group, *recorder) {
	g := fakeGroup(n, me)
	// Fixed start for auto (the transcribed table): the goldens record the
	// rules and programs, TestAutoMeetsMeasurements the measured table.
	g.b.table = goldenTable(t)
	g.b.stream = cudadrv.WrapStream(g.b.ctx, ownStream)
	g.b.lcCTAs = DefaultLowContentionCTAs
	k := &g.b.kern
	k.fns = make([]cudadrv.Function, len(kernelEntries))
	k.fns[agKernel], k.fns[arKernel], k.fns[lcKernel], k.fns[hsKernel], k.fns[guardKernel], k.fns[llKernel] = fnAG, fnAR, fnLC, fnHS, fnGuard, fnLL
	side := make([]uint64, max(3, n-1))
	joins := make([]uint64, len(side))
	for i := range side {
		side[i], joins[i] = uint64(0x100+i), uint64(0x200+i)
	}
	g.st.h = handles{side: side, joins: joins, fork: 0x301, forkX: 0x302, last: 0x303, order: 0x304}
	g.hs.stream, g.hs.ev = 0x401, [2]uint64{0x402, 0x403}
	g.caps.ceWhy = "every rank is on this host and P2P-reachable"
	if !c.ce {
		g.caps.ce, g.caps.ceWhy = false, "rank 0 runs on another host"
	}
	switch {
	case c.kern && c.ce:
		g.paths.kernel.args, g.paths.twoShot.second, g.paths.lc.args, g.hs.args = cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes)
		g.paths.ll.args = cudadrv.NewArgs(llArgBytes)
		g.hs.fill()
		g.paths.lc.staging = &segment{base: 0xC000_0000, size: lcStagingBytes}
	case c.ce:
		g.caps.kernWhy = "rank 0 cannot load it"
	default:
		g.caps.kernWhy = "it needs peer mappings: " + g.caps.ceWhy
	}
	switch c.nccl {
	case "":
		g.b.nccl.err = errors.New("fake: libnccl.so.2 not found")
		g.nccl = ncclGroup{err: g.b.nccl.err, winWhy: "no NCCL"}
	case "full", "noplain":
		g.b.nccl.lib = &libnccl.Lib{Version: libnccl.Version(2, 28, 9), HasWindows: true}
		g.nccl = ncclGroup{comm: &bnccl.Comm{}, windows: true}
		if c.nccl == "full" {
			g.nccl.plain = &bnccl.Comm{}
		}
	case "nowin":
		g.b.nccl.lib = &libnccl.Lib{Version: libnccl.Version(2, 26, 2)}
		g.nccl = ncclGroup{comm: &bnccl.Comm{}, winWhy: "NCCL 2.26.2 has no window registration"}
	}
	g.st.fences = []streamFence{{stream: callerStream, ev: cudadrv.WrapEvent(g.b.ctx, 0x3050)}} // 4096 and above: a pointer to the Go runtime
	if c.gate {
		attachGate(g, goldenAgreements(t, n)[me])
	}
	rec := &recorder{g: g, w: &bytes.Buffer{}}
	g.x = rec
	return g, rec
}

// attachGate gives g a call gate over agreement a (its guard's words at a
// fake device address: nothing runs them).
func attachGate(g *Group, a *members.HostAgreement) {
	g.ag.group = a
	gt := &callGate{g: &g.core, ag: a, c: a.Gate(), args: cudadrv.NewArgs(kernArgBytes), quit: make(chan struct{}), done: make(chan struct{})}
	gt.args.PutU64(guardApproved, 0xFA00_0000+members.ApprovedOffset)
	gt.failedDev = 0xFA00_0000 + members.FailedOffset
	gt.args.PutU64(guardFailed, gt.failedDev)
	gt.args.PutU64(argTimeout, uint64(g.b.watchdog.Nanoseconds()))
	g.gate = gt
}

// goldenAgreements joins n HostAgreements in this process (by rank); a
// rank whose gate nobody drives never publishes.
func goldenAgreements(t testing.TB, n int) []*members.HostAgreement {
	t.Helper()
	tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
	ranks := make([]int, n)
	xs := make([]*rendezvous.FDExchange, n)
	for r := range n {
		ranks[r] = r
		x, err := rendezvous.NewFDExchange(rendezvous.Env{Rank: r, WorldSize: n, LocalRank: r, LocalWorldSize: n, Token: tok, JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(x.Close)
		xs[r] = x
	}
	as := make([]*members.HostAgreement, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			as[r], errs[r] = members.NewHostAgreement(context.Background(), "golden", xs[r], "golden", ranks, r, wait.DefaultTimeout)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		t.Cleanup(as[r].Close)
	}
	return as
}

// chooseReq is what Run would choose for req, its buffers in NCCL windows
// or not (win).
func chooseReq(g *Group, req backend.Request, win bool) (coll.Algo, string, error) {
	c := newCall(req, win, g.b.nccl.version())
	_, a, why, err := g.paths.choose(&c)
	return a, why, err
}

// goldenReq is a named request.
type goldenReq struct {
	name string
	req  backend.Request
}

// makeReq places a collective in segment 1 of g: the output at offset
// shift, an out-of-place input at 512 MiB + shift; sym says which of them
// count as registered ("io", "o", "i", "-").
func makeReq(g *Group, k coll.Kind, dt coll.DType, op coll.ReduceOp, count int64, inPlace bool, sym string, shift int64) goldenReq {
	n, me := len(g.Ranks), g.Me
	base := seg1(g).bases[me]
	one := count * int64(dt.Size())
	req := backend.Request{Kind: k, DType: dt, Op: op, Count: count}
	outOff, inOff := shift, int64(512<<20)+shift
	switch {
	case !inPlace:
	case k == coll.AllGather:
		inOff = outOff + int64(me)*one
	case k == coll.ReduceScatter:
		inOff, outOff = outOff, outOff+int64(me)*one
	default:
		inOff = outOff
	}
	req.Out, req.OutSym = coll.Span{Ptr: base + uint64(outOff)}, backend.Sym{OK: true, Seg: 1, Off: outOff}
	req.In, req.InSym = coll.Span{Ptr: base + uint64(inOff)}, backend.Sym{OK: true, Seg: 1, Off: inOff}
	if !strings.Contains(sym, "o") {
		req.OutSym = backend.Sym{}
	}
	if !strings.Contains(sym, "i") {
		req.InSym = backend.Sym{}
	}
	req.Record = agree.Record{agree.RecCall<<56 | uint64(k)<<48 | uint64(dt)<<40 | uint64(op)<<32, 0, uint64(count), 1<<48 | uint64(inOff), 1<<48 | uint64(outOff)}
	req = req.Shaped(n, me)
	place := "out"
	if req.InPlace {
		place = "in"
	}
	return goldenReq{fmt.Sprintf("%v %v %v count=%d %s-place sym=%s shift=%d", k, dt, op, count, place, sym, shift), req}
}

// goldenReqs is the request table: every op, placement, registration and
// size band in bf16, then shifted buffers, float32, int8 and other ops.
func goldenReqs(g *Group, small bool) []goldenReq {
	kinds := []coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast}
	counts := []int64{1, 361, 4096, 1 << 19, 3 << 20, 1 << 23, 1 << 25}
	syms := []string{"io", "o", "i", "-"}
	if small {
		counts = []int64{361, 4096, 3 << 20}
		syms = []string{"io", "o"}
	}
	var out []goldenReq
	each := func(f func(k coll.Kind, inPlace bool)) {
		for _, k := range kinds {
			for _, inPlace := range []bool{false, true} {
				if k == coll.Broadcast && !inPlace {
					continue // Shaped makes every broadcast in place
				}
				f(k, inPlace)
			}
		}
	}
	each(func(k coll.Kind, inPlace bool) {
		for _, s := range syms {
			for _, c := range counts {
				out = append(out, makeReq(g, k, coll.BFloat16, coll.Sum, c, inPlace, s, 0))
			}
		}
	})
	each(func(k coll.Kind, inPlace bool) {
		for _, c := range counts {
			out = append(out, makeReq(g, k, coll.BFloat16, coll.Sum, c, inPlace, "io", 2))
			out = append(out, makeReq(g, k, coll.Float32, coll.Sum, c, inPlace, "io", 0))
		}
		out = append(out, makeReq(g, k, coll.BFloat16, coll.Sum, 4096, inPlace, "io", 1))
		for _, c := range []int64{1, 361, 4096} {
			out = append(out, makeReq(g, k, coll.Int8, coll.Sum, c, inPlace, "io", 0))
		}
		if k == coll.AllReduce || k == coll.ReduceScatter {
			out = append(out, makeReq(g, k, coll.Float16, coll.Avg, 4096, inPlace, "io", 0))
			out = append(out, makeReq(g, k, coll.Float16, coll.Max, 4096, inPlace, "io", 0))
		}
	})
	return out
}

// goldenAlgos are the goldens' columns: the paths in the order they were
// first recorded, then any other row of pathTable (a new path adds its
// column), then an unknown name.
var goldenAlgos = func() []coll.Algo {
	as := []coll.Algo{coll.AlgoAuto, coll.AlgoDirect, coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention,
		coll.AlgoLL, coll.AlgoCE, coll.AlgoNCCL, coll.AlgoNCCLWindow, coll.AlgoHier}
	for _, r := range pathTable {
		if !slices.Contains(as, r.algo) {
			as = append(as, r.algo)
		}
	}
	return append(as, "magic")
}()

// checkGolden compares got with testdata/name.gz (or writes it with
// -update). The files are gzipped text (a few MB each, a few hundred KB
// compressed); zcat and zdiff read them.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".gz")
	if *update {
		var z bytes.Buffer
		zw, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(got)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, z.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/backend/cuda -run Golden -update to create it)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\ngot  %s\nwant %s", file, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", file, len(gl), len(wl))
	}
}

var chooseCfgs = []goldenCfg{
	{name: "kern+ce+nccl", kern: true, ce: true, nccl: "full"},
	{name: "kern+ce+nccl-noplain", kern: true, ce: true, nccl: "noplain"},
	{name: "kern+ce+nccl-nowin", kern: true, ce: true, nccl: "nowin"},
	{name: "kern+ce", kern: true, ce: true},
	{name: "ce+nccl", ce: true, nccl: "full"},
	{name: "ce", ce: true},
	{name: "remote+nccl", nccl: "full"},
	{name: "remote"},
}

// strs numbers the distinct reasons and error texts of a golden file (they
// repeat thousands of times); the table ends the file.
type strs struct {
	ids  map[string]int
	list []string
}

func (t *strs) id(s string) string {
	if t.ids == nil {
		t.ids = map[string]int{}
	}
	i, ok := t.ids[s]
	if !ok {
		i = len(t.list)
		t.ids[s] = i
		t.list = append(t.list, s)
	}
	return fmt.Sprintf("s%d", i)
}

func (t *strs) err(err error) string {
	if err == nil {
		return "-"
	}
	return t.id(err.Error())
}

func (t *strs) table(w *bytes.Buffer) {
	fmt.Fprintf(w, "## strings\n")
	for i, s := range t.list {
		fmt.Fprintf(w, "s%d %q\n", i, s)
	}
}

// TestGoldenChoose: the algorithm, reason and error of every forced and
// auto choice, with and without windows (w: when it differs), and
// Explain's answer.
func TestGoldenChoose(t *testing.T) {
	var w bytes.Buffer
	var st strs
	for _, c := range chooseCfgs {
		for _, nm := range [][2]int{{2, 0}, {2, 1}, {3, 1}, {4, 1}} {
			if nm[1] == 0 && c.name != "kern+ce+nccl" {
				continue
			}
			g, _ := goldenGroup(t, c, nm[0], nm[1])
			for _, r := range goldenReqs(g, false) {
				e := g.Explain(r.req)
				fmt.Fprintf(&w, "%s n=%d me=%d | %s | explain=%s/%s", c.name, nm[0], nm[1], r.name, e.Algo, st.id(e.Reason))
				for _, a := range goldenAlgos {
					req := r.req
					req.Algo = a
					var res [2]string
					for i, win := range []bool{false, true} {
						algo, why, err := chooseReq(g, req, win)
						res[i] = fmt.Sprintf("%s/%s/%s", algo, st.id(why), st.err(err))
					}
					fmt.Fprintf(&w, " %s=%s", a, res[0])
					if res[1] != res[0] && g.nccl.comm != nil && g.nccl.windows {
						fmt.Fprintf(&w, ",w:%s", res[1])
					}
				}
				w.WriteString("\n")
			}
		}
	}
	st.table(&w)
	checkGolden(t, "choose.golden", w.Bytes())
}

// runAlgos: direct is auto, and an unknown name is refused before Run
// issues anything (choose.golden has both).
var runAlgos = []coll.Algo{coll.AlgoAuto, coll.AlgoKernel, coll.AlgoTwoShot, coll.AlgoLowContention, coll.AlgoLL, coll.AlgoCE, coll.AlgoNCCL, coll.AlgoNCCLWindow}

var runCfgs = []goldenCfg{
	{name: "kern+ce+nccl+gate", kern: true, ce: true, nccl: "full", gate: true},
	{name: "kern+ce+nccl", kern: true, ce: true, nccl: "full"},
	{name: "kern+ce", kern: true, ce: true},
	{name: "ce+nccl+gate", ce: true, nccl: "full", gate: true},
	{name: "remote+nccl", nccl: "full"},
}

// TestGoldenRun: what Run issues for every request and algorithm, in
// checked mode and not, on the backend's stream and a caller's, one group
// per configuration and size (state carries over calls as on a GPU: the
// parameter blocks, the gate's numbering, the copy-engine epoch).
func TestGoldenRun(t *testing.T) {
	var w bytes.Buffer
	var st strs
	for _, c := range runCfgs {
		for _, nm := range [][2]int{{2, 1}, {3, 2}, {4, 1}} {
			g, rec := goldenGroup(t, c, nm[0], nm[1])
			calls := 0
			fmt.Fprintf(&w, "### %s n=%d me=%d\n", c.name, nm[0], nm[1])
			for i, r := range goldenReqs(g, c.gate) {
				for _, a := range runAlgos {
					for _, checked := range []bool{false, true} {
						req := r.req
						req.Algo, req.Checked = a, checked
						if i%2 == 1 {
							req.Stream = callerStream
						}
						if c.gate {
							// Peers never publish: a rank may run at most
							// 256 calls ahead at the gate. Only paths that
							// publish count.
							if _, _, err := chooseReq(g, req, g.nccl.windowed(req)); err == nil {
								calls++
							}
							if calls > 250 {
								g, rec = goldenGroup(t, c, nm[0], nm[1])
								calls = 1
								fmt.Fprintf(&w, "### new group\n")
							}
						}
						p, err := g.Run(context.Background(), req)
						fmt.Fprintf(&w, "# %s | %s checked=%v stream=%#x: %s %s %s\n", r.name, a, checked, req.Stream, p.Algo, st.id(p.Reason), st.err(err))
						w.Write(rec.w.Bytes())
						rec.w.Reset()
					}
				}
			}
		}
	}
	st.table(&w)
	checkGolden(t, "run.golden", w.Bytes())
}

// nopExec is an executor that issues nothing: BenchmarkRunHost measures
// the Go side of a call alone (the cgo launch is TestLaunchCost's).
type nopExec struct{}

func (nopExec) capturing(*cudadrv.Context, uint64) (bool, error)        { return false, nil }
func (nopExec) program(*cudadrv.Program) error                          { return nil }
func (nopExec) scratch(*cudadrv.Context, uint64, int64) (uint64, error) { return scratchAt, nil }
func (nopExec) release(*cudadrv.Context, uint64, uint64)                {}
func (nopExec) nccl(context.Context, *bnccl.Comm, backend.Request, bool) (coll.Path, error) {
	return coll.Path{Algo: coll.AlgoNCCL}, nil
}

// hostCostReqs are small auto calls on every route auto takes for them
// with symmem's paths and NCCL loaded: kernel, ce, plain NCCL.
func hostCostReqs(g *Group) []goldenReq {
	return []goldenReq{
		{"all_gather 64K in-place auto", makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req},
		{"all_reduce 64K auto", makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<15, false, "io", 0).req},
		{"reduce_scatter 64K auto", makeReq(g, coll.ReduceScatter, coll.BFloat16, coll.Sum, 1<<14, false, "io", 0).req},
		{"all_gather 64K input registered auto (ce)", makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, false, "i", 0).req},
		{"all_gather 64K unregistered auto (nccl)", makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, false, "-", 0).req},
		{"all_gather 64K in-place ll", forced(makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req, coll.AlgoLL)},
		{"all_reduce 64K ll", forced(makeReq(g, coll.AllReduce, coll.BFloat16, coll.Sum, 1<<15, false, "io", 0).req, coll.AlgoLL)},
		{"all_gather 64K in-place kernel", forced(makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req, coll.AlgoKernel)},
	}
}

// forced is req with algorithm a.
func forced(req backend.Request, a coll.Algo) backend.Request {
	req.Algo = a
	return req
}

// TestRunAllocatesNothing: Group.Run's Go side, on each route of
// hostCostReqs (a formatted reason or refusal per call would show here).
func TestRunAllocatesNothing(t *testing.T) {
	g, _ := goldenGroup(t, goldenCfg{name: "allocs", kern: true, ce: true, nccl: "full"}, 2, 0)
	g.x = nopExec{}
	ctx := context.Background()
	for _, c := range hostCostReqs(g) {
		var err error
		if n := testing.AllocsPerRun(100, func() { _, err = g.Run(ctx, c.req) }); n != 0 || err != nil {
			t.Errorf("%s: %v allocations per call (want 0), err %v", c.name, n, err)
		}
	}
}

// BenchmarkRunHost: the host cost of Group.Run up to the driver (choice,
// call record, program build) for the small calls whose host cost the
// GPU suite measures end to end (TestGPUUserHostCost).
func BenchmarkRunHost(b *testing.B) {
	g, _ := goldenGroup(b, goldenCfg{name: "bench", kern: true, ce: true, nccl: "full"}, 2, 0)
	g.x = nopExec{}
	for _, c := range hostCostReqs(g) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				if _, err := g.Run(ctx, c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRunHostGated: BenchmarkRunHost's kernel all-gather with the call
// gate (ranks on one host), its peer publishing the same call after each
// one: the gate's share of a call's host cost (the kernel path publishes,
// never waits).
func BenchmarkRunHostGated(b *testing.B) {
	g, _ := goldenGroup(b, goldenCfg{name: "bench", kern: true, ce: true, nccl: "full"}, 2, 0)
	g.x = nopExec{}
	as := goldenAgreements(b, 2)
	attachGate(g, as[0])
	peer := as[1].Gate()
	req := makeReq(g, coll.AllGather, coll.BFloat16, coll.Sum, 1<<14, true, "io", 0).req
	entry := members.GateEntry{Record: req.Record, Path: agree.PathCode(coll.AlgoKernel)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := g.Run(ctx, req)
		if err != nil || p.Algo != coll.AlgoKernel {
			b.Fatalf("%v via %s", err, p.Algo)
		}
		if _, err := peer.Publish(ctx, entry); err != nil {
			b.Fatal(err)
		}
	}
}
