package cuda

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

func TestLCSubChunk(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		n     int
		want  int64
	}{
		{16, 2, 16},                // tiny: one sub-chunk, the whole chunk
		{48 << 10, 2, 48 << 10},    // below lcMinChunk
		{1 << 20, 2, 128 << 10},    // 1 MiB / 8
		{8 << 20, 2, 1 << 20},      // 8 sub-chunks
		{512 << 20, 2, 16 << 20},   // capped: 32 MiB staging / 2 slots
		{512 << 20, 8, 2304 << 10}, // 32 MiB / 14, down to 64 KiB multiples
		{100016, 2, lcMinChunk},    // not a multiple of the sub-chunk: the last is short
		{2, 2, 16},                 // one element: a whole vector of staging
		{722, 3, 736},              // odd: rounded up to 16, the sub-chunk is short
		{100002, 2, lcMinChunk},    // odd and long: the last sub-chunk is short and odd
	} {
		got, want := lcSubChunk(tc.bytes, tc.n), tc.want
		if got != want || got%kernAlign != 0 || 2*int64(tc.n-1)*got > lcStagingBytes {
			t.Errorf("lcSubChunk(%d, %d) = %d, want %d (a multiple of 16 that fits the staging)", tc.bytes, tc.n, got, want)
		}
	}
}

// lcGroup is a fake group that can build lc programs.
func lcGroup(n, me int) *Group {
	g := fakeGroup(n, me)
	g.b.lcCTAs = DefaultLowContentionCTAs
	g.paths.kernel.args, g.paths.lc.args = cudadrv.NewArgs(kernArgBytes), cudadrv.NewArgs(kernArgBytes)
	g.paths.lc.staging = &segment{base: 0xC000_0000, size: lcStagingBytes}
	side := make([]uint64, max(3, n-1))
	joins := make([]uint64, len(side))
	for i := range side {
		side[i], joins[i] = uint64(100+i), uint64(200+i)
	}
	g.st.h.side, g.st.h.joins = side, joins
	return g
}

// runLCModel executes one rank's lc program under a random interleaving of
// its streams and a model of the reduction kernel (ctas CTAs, each: wait
// for every arrived[j] >= c+1, read sub-chunk c of every staging slot, add
// 1 to finished[c%2], the last one publishes consumed = c+1). Memory holds words and, per staging sub-chunk, the
// source address last copied there. It returns an error when the kernel
// reads a slot that does not hold the sub-chunk it expects, on a deadlock,
// or when the words are not back to 0 at the end. The peers' signal words
// count as set.
func runLCModel(g *Group, req backend.Request, seed int64, mutate func([]cudadrv.Op) []cudadrv.Op) error {
	const s = 7
	p := cudadrv.NewProgram(64)
	if err := g.paths.lc.build(p, onStream(req, s)); err != nil {
		return err
	}
	ops := p.Ops()
	if mutate != nil {
		ops = mutate(append([]cudadrv.Op(nil), ops...))
	}
	n, me := len(g.Ranks), g.Me
	common, off, chunk := chunkOf(req, len(g.Ranks), g.Me)
	sub := lcSubChunk(common, n)
	subs := int((chunk + sub - 1) / sub)
	words := g.peers.pads[me] + lcWords
	var ctas int
	for _, o := range ops {
		if o.Kind == cudadrv.OpLaunch {
			ctas = int(uint32(o.C))
		}
	}
	// Streams: each its own queue of ops in program order.
	queues := map[uint64][]int{}
	var order []uint64
	for i, o := range ops {
		if o.Kind == cudadrv.OpCtx {
			continue
		}
		if _, ok := queues[o.Stream]; !ok {
			order = append(order, o.Stream)
		}
		queues[o.Stream] = append(queues[o.Stream], i)
	}
	// An event wait refers to the latest record of the event before it in
	// program order.
	recordOf := map[int]int{}
	last := map[uint64]int{}
	for i, o := range ops {
		switch o.Kind {
		case cudadrv.OpRecord:
			last[o.A] = i
		case cudadrv.OpWaitEvent:
			r, ok := last[o.A]
			if !ok {
				return fmt.Errorf("op %d waits for event %d, never recorded", i, o.A)
			}
			recordOf[i] = r
		}
	}
	mem := map[uint64]uint32{}
	content := map[uint64]uint64{}
	doneOp := map[int]bool{}
	pos := map[uint64]int{}
	// The kernel: per CTA, the next sub-chunk; running while launched.
	kern := make([]int, ctas)
	launched, finished := false, false
	cyclicGE := func(v, want uint32) bool { return int32(v-want) >= 0 }
	rng := rand.New(rand.NewSource(seed))
	for {
		type step struct {
			stream uint64
			cta    int
		}
		var runnable []step
		for _, st := range order {
			q := queues[st]
			if pos[st] == len(q) {
				continue
			}
			i := q[pos[st]]
			o := ops[i]
			ok := true
			switch o.Kind {
			case cudadrv.OpWaitEvent:
				ok = doneOp[recordOf[i]]
			case cudadrv.OpWait32:
				if o.A >= words && o.A < words+uint64(4*n) {
					ok = cyclicGE(mem[o.A], uint32(o.B))
				}
			case cudadrv.OpLaunch:
				ok = !launched || finished
			}
			if ok {
				runnable = append(runnable, step{stream: st, cta: -1})
			}
		}
		if launched && !finished {
			for b, c := range kern {
				if c == subs {
					continue
				}
				all := true
				for j := 0; j < n-1; j++ {
					all = all && cyclicGE(mem[words+uint64(4+4*j)], uint32(c+1))
				}
				if all {
					runnable = append(runnable, step{cta: b})
				}
			}
		}
		if len(runnable) == 0 {
			for _, st := range order {
				if pos[st] != len(queues[st]) {
					return fmt.Errorf("deadlock: stream %d stuck at op %d (%v)", st, queues[st][pos[st]], ops[queues[st][pos[st]]])
				}
			}
			break
		}
		x := runnable[rng.Intn(len(runnable))]
		if x.cta >= 0 {
			c := kern[x.cta]
			j := 0
			for r := 0; r < n; r++ {
				if r == me {
					continue
				}
				slot := g.paths.lc.staging.base + uint64((int64(c%2)*int64(n-1)+int64(j))*sub)
				want, _ := g.peers.at(req.InSym.Seg, r, req.InSym.Off+off+int64(c)*sub)
				if content[slot] != want {
					return fmt.Errorf("CTA %d summing sub-chunk %d read slot %#x holding %#x, want rank %d's %#x", x.cta, c, slot, content[slot], r, want)
				}
				j++
			}
			fin := words + lcFinished + uint64(4*(c%2))
			if mem[fin]++; mem[fin] == uint32(ctas) {
				mem[fin] = 0
				mem[words] = uint32(c + 1)
			}
			kern[x.cta]++
			done := true
			for _, k := range kern {
				done = done && k == subs
			}
			finished = done
			continue
		}
		i := queues[x.stream][pos[x.stream]]
		o := ops[i]
		if o.Kind == cudadrv.OpLaunch {
			if !launched {
				launched = true
				if ctas == 0 || subs == 0 {
					finished = true
				}
				continue // the stream waits for the kernel: re-examined next step
			}
		}
		switch o.Kind {
		case cudadrv.OpWrite32:
			mem[o.A] = uint32(o.B)
		case cudadrv.OpCopy:
			content[o.A] = o.B
		}
		doneOp[i] = true
		pos[x.stream]++
	}
	if !finished {
		return fmt.Errorf("the kernel did not finish")
	}
	for w := 0; w < lcWordBytes/4; w++ {
		if v := mem[words+uint64(4*w)]; v != 0 {
			return fmt.Errorf("word %d is %d after the call, want 0 (the next call starts from 0)", w, v)
		}
	}
	return nil
}

// TestLowContentionPipeline: under random interleavings the kernel always
// reads the right sub-chunk from every slot, for reduce-scatter and
// all-reduce, 2 to 8 ranks, sizes from one sub-chunk to many with a short
// last one. Without the side streams' waits for consumed, some interleaving
// overwrites a slot before it was summed: the model catches it.
func TestLowContentionPipeline(t *testing.T) {
	for _, tc := range []struct {
		n, me int
		kind  coll.Kind
		count int64 // bf16 elements per rank (reduce-scatter) or in total (all-reduce)
	}{
		{2, 0, coll.ReduceScatter, 8},
		{2, 1, coll.ReduceScatter, 3 << 20},
		{3, 2, coll.ReduceScatter, 1<<20 + 8},
		{8, 5, coll.ReduceScatter, 1 << 21},
		{4, 1, coll.AllReduce, 1 << 22},
		{3, 1, coll.ReduceScatter, 361},       // odd chunks, one short sub-chunk
		{3, 2, coll.ReduceScatter, 1<<19 + 1}, // odd, several sub-chunks, the last short and odd
		{4, 3, coll.AllReduce, 1<<21 + 1},     // the last rank's chunk is shorter
		{4, 2, coll.AllReduce, 1<<20 + 1},
		{4, 3, coll.AllReduce, 3}, // ranks 1..3 own nothing
		{2, 1, coll.AllReduce, 1},
	} {
		t.Run(fmt.Sprintf("%d ranks %v %d", tc.n, tc.kind, tc.count), func(t *testing.T) {
			g := lcGroup(tc.n, tc.me)
			req := rsReq(g, tc.count)
			if tc.kind == coll.AllReduce {
				req = arReq(g, tc.count, coll.BFloat16, false)
			}
			if err := g.paths.lc.whyNot(req); err != nil {
				t.Fatal(err)
			}
			for seed := int64(0); seed < 20; seed++ {
				if err := runLCModel(g, req, seed, nil); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			common, _, chunk := chunkOf(req, len(g.Ranks), g.Me)
			if chunk/lcSubChunk(common, tc.n) < 3 {
				return // two slots hold every sub-chunk: nothing to overwrite
			}
			noWaits := func(ops []cudadrv.Op) []cudadrv.Op {
				var out []cudadrv.Op
				for _, o := range ops {
					if o.Kind != cudadrv.OpWait32 || o.Stream == 7 {
						out = append(out, o)
					}
				}
				return out
			}
			caught := false
			for seed := int64(0); seed < 50 && !caught; seed++ {
				caught = runLCModel(g, req, seed, noWaits) != nil
			}
			if !caught {
				t.Fatal("the model never caught a slot overwritten before it was summed (waits removed)")
			}
		})
	}
}

// TestLowContentionAllReducePushes: the all-reduce half pushes chunk me of
// the output into chunk me of every peer's output, after the reduction,
// and the call ends with the done round.
func TestLowContentionAllReducePushes(t *testing.T) {
	const n, me = 4, 2
	g := lcGroup(n, me)
	req := arReq(g, 1<<20, coll.Float16, true) // 2 MiB, in place: chunks of 512 KiB
	const chunk = 512 << 10
	p := cudadrv.NewProgram(64)
	if err := g.paths.lc.build(p, onStream(req, 7)); err != nil {
		t.Fatal(err)
	}
	ops := p.Ops()
	launch, pushes := -1, map[uint64]bool{}
	for i, o := range ops {
		switch {
		case o.Kind == cudadrv.OpLaunch:
			launch = i
		case o.Kind == cudadrv.OpCopy && o.B == req.Out.Ptr+me*chunk:
			if o.C != chunk || i < launch {
				t.Fatalf("push %d: %d bytes before the launch (op %d)", i, o.C, launch)
			}
			pushes[o.A] = true
		}
	}
	for r := 0; r < n; r++ {
		want := seg1(g).bases[r] + uint64(req.OutSym.Off) + me*chunk
		if pushes[want] != (r != me) {
			t.Fatalf("push to rank %d's chunk %d (%#x): %v", r, me, want, pushes[want])
		}
	}
	a := g.paths.lc.args.Bytes()
	if got := le64(a, arOut); got != req.Out.Ptr+me*chunk {
		t.Fatalf("kernel output %#x, want chunk %d of the output", got, me)
	}
	if got := le64(a, lcOwn); got != req.In.Ptr+me*chunk {
		t.Fatalf("own input %#x, want chunk %d of the input", got, me)
	}
	tail := ops[len(ops)-(n-1):]
	for _, o := range tail {
		if o.Kind != cudadrv.OpWrite32 && o.Kind != cudadrv.OpWait32 {
			t.Fatalf("the call does not end with the done round: %v", tail)
		}
	}
}

func le64(b []byte, off int) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[off+i])
	}
	return v
}

// TestLowContentionOddCounts: every rank's lc all-reduce of a count not
// divisible by n reduces and pushes exactly its part (empty parts: no copy
// at all, yet the same signal rounds), the kernel's parameters say its
// bytes and mode, and sub-chunks come from the common chunk.
func TestLowContentionOddCounts(t *testing.T) {
	const n = 4
	for _, count := range []int64{3, 361, 1<<20 + 1} {
		var rounds []int
		var total int64
		for me := 0; me < n; me++ {
			g := lcGroup(n, me)
			req := arReq(g, count, coll.Float16, me == 1)
			if err := g.paths.lc.whyNot(req); err != nil {
				t.Fatal(err)
			}
			p := cudadrv.NewProgram(64)
			if err := g.paths.lc.build(p, onStream(req, 7)); err != nil {
				t.Fatal(err)
			}
			common, off, mine := chunkOf(req, len(g.Ranks), g.Me)
			total += mine
			a := g.paths.lc.args.Bytes()
			if le64(a, arBytes) != uint64(mine) || le64(a, arOut) != req.Out.Ptr+uint64(off) || le64(a, lcOwn) != req.In.Ptr+uint64(off) {
				t.Fatalf("count %d rank %d: bytes %d out %#x own %#x, want %d at %d", count, me, le64(a, arBytes), le64(a, arOut), le64(a, lcOwn), mine, off)
			}
			if got := le64(a, lcChunk); got != uint64(lcSubChunk(common, n)) || got%kernAlign != 0 {
				t.Fatalf("count %d rank %d: sub-chunk %d", count, me, got)
			}
			if got := binary.LittleEndian.Uint32(a[argUnit:]); got != kernAlign && mine > 0 {
				t.Fatalf("count %d rank %d: unit %d, want vectors (the chunk starts aligned)", count, me, got)
			}
			pulled, pushed, waits := int64(0), int64(0), 0
			for _, o := range p.Ops() {
				switch {
				case o.Kind == cudadrv.OpCopy && o.B == req.Out.Ptr+uint64(off):
					pushed += int64(o.C)
				case o.Kind == cudadrv.OpCopy:
					pulled += int64(o.C)
				case o.Kind == cudadrv.OpWait32 && o.Stream == 7:
					waits++
				}
			}
			if pulled != int64(n-1)*mine || pushed != int64(n-1)*mine {
				t.Fatalf("count %d rank %d: pulled %d pushed %d bytes, want %d each", count, me, pulled, pushed, int64(n-1)*mine)
			}
			rounds = append(rounds, waits)
			for seed := int64(0); seed < 5; seed++ {
				if err := runLCModel(g, req, seed, nil); err != nil {
					t.Fatalf("count %d rank %d seed %d: %v", count, me, seed, err)
				}
			}
		}
		if total != 2*count {
			t.Fatalf("count %d: ranks reduce %d bytes in all, want %d", count, total, 2*count)
		}
		for _, w := range rounds {
			if w != rounds[0] {
				t.Fatalf("count %d: ranks wait on the main stream %v times: the signal rounds differ", count, rounds)
			}
		}
	}
}

// TestLowContentionModes: a reduce-scatter's chunk me at an offset not a
// multiple of 16 runs the lc kernel in element mode; aligned, in vector
// mode with the tail.
func TestLowContentionModes(t *testing.T) {
	for _, tc := range []struct {
		me    int
		count int64
		want  uint32
	}{{0, 361, 16}, {1, 361, 2}, {2, 361, 2}, {1, 8, 16}, {1, 4, 2}} {
		g := lcGroup(3, tc.me)
		req := rsReq(g, tc.count)
		if err := g.paths.lc.whyNot(req); err != nil {
			t.Fatal(err)
		}
		if err := g.paths.lc.build(cudadrv.NewProgram(64), onStream(req, 7)); err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint32(g.paths.lc.args.Bytes()[argUnit:]); got != tc.want {
			t.Errorf("rank %d, %d bf16: unit %d, want %d", tc.me, tc.count, got, tc.want)
		}
	}
}
