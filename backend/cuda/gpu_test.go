package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/pool"
	"github.com/symmem/symmem/rendezvous"
)

func newTarget(t *testing.T, env rendezvous.Env) *Target {
	t.Helper()
	tg, err := NewTarget(context.Background(), env, TargetOptions{Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tg.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if env.Rank == 0 {
		fmt.Printf("%sbatch mem ops: %v\n", tg.B.Describe(), cuda.HaveBatchMemOp())
	}
	return tg
}

// fill writes pseudo-random bytes from seed.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for ; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
}

// seeds gives every rank's fresh seed for one case.
func seeds(t *testing.T, tg *Target) []uint64 {
	t.Helper()
	mine := rand.Uint64() ^ uint64(time.Now().UnixNano())
	all, err := tg.ExchangeFloat64([]float64{float64(mine >> 11)})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(all))
	for r, v := range all {
		out[r] = uint64(v[0])
	}
	return out
}

func algosOf(tg *Target) []coll.Algo {
	a := []coll.Algo{coll.AlgoCE}
	if tg.G.kargs != nil {
		a = append(a, coll.AlgoKernel)
	}
	if tg.G.nccl.comm != nil {
		a = append(a, coll.AlgoNCCL, coll.AlgoNCCLWindow, coll.AlgoAuto)
	}
	return a
}

// gatherCase runs one all-gather on group g with fresh random data and
// returns the number of wrong bytes summed over ranks.
type gatherCase struct {
	g       *Group
	gid     pool.GroupID
	out, in coll.Span // buffers big enough
	count   int64
	dt      coll.DType
	inPlace bool
	algo    coll.Algo
}

func runGatherCase(t *testing.T, tg *Target, c gatherCase, host, want []byte) (coll.Path, int64) {
	t.Helper()
	n, me := c.g.Size(), c.g.Rank()
	slice := c.count * int64(c.dt.Size())
	total := slice * int64(n)
	sd := seeds(t, tg)
	mine := host[:slice]
	fill(mine, sd[me])
	if err := cuda.Memset8(tg.B.ctx, c.out.Ptr, 0xAB, total+64); err != nil {
		t.Fatal(err)
	}
	in := c.in
	if c.inPlace {
		in = coll.Span{Ptr: c.out.Ptr + uint64(int64(me)*slice), Len: slice}
	}
	if err := tg.Write(in, mine); err != nil {
		t.Fatal(err)
	}
	if err := tg.Barrier(); err != nil {
		t.Fatal(err)
	}
	req := tg.Request(c.g, c.gid, coll.AllGather, coll.Span{Ptr: c.out.Ptr, Len: total}, coll.Span{Ptr: in.Ptr, Len: slice}, c.count, c.dt, coll.Sum, 0, c.algo)
	path, err := c.g.Run(context.Background(), req)
	if errors.Is(err, ErrNCCLInPlaceMisaligned) || errors.Is(err, errKernelAlign) {
		// Refused on every rank alike (same geometry): a known NCCL defect,
		// or the kernel's 16-byte vectors.
		return coll.Path{Algo: c.algo, Reason: "refused: " + err.Error()}, 0
	}
	if err != nil {
		t.Fatalf("%v count=%d %v inPlace=%v: %v", c.algo, c.count, c.dt, c.inPlace, err)
	}
	if err := tg.Sync(); err != nil {
		t.Fatal(err)
	}
	got := host[:total+64]
	if err := tg.Read(got, coll.Span{Ptr: c.out.Ptr, Len: total + 64}); err != nil {
		t.Fatal(err)
	}
	var wrong int64
	for r := 0; r < n; r++ {
		w := want[:slice]
		fill(w, sd[r])
		if !bytes.Equal(got[int64(r)*slice:int64(r+1)*slice], w) {
			for i := range w {
				if got[int64(r)*slice+int64(i)] != w[i] {
					wrong++
				}
			}
		}
	}
	for _, b := range got[total:] {
		if b != 0xAB {
			wrong++ // wrote past the output
		}
	}
	all, err := tg.ExchangeFloat64([]float64{float64(wrong)})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, v := range all {
		sum += int64(v[0])
	}
	return path, sum
}

// TestGPUAllGatherCorrect: fresh random data, 4 KiB..1 GiB, odd counts,
// bf16/fp16/fp32/int8, in-place and out-of-place, every algorithm, and the
// copy-engine variants.
func TestGPUAllGatherCorrect(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		n := int64(tg.Size())
		const maxBytes = 1 << 30
		out, err := tg.Alloc(maxBytes+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tg.Alloc(maxBytes/n+4096, true)
		if err != nil {
			t.Fatal(err)
		}
		host, want := make([]byte, maxBytes+4096), make([]byte, maxBytes/n+4096)
		sizes := []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30}
		dts := []coll.DType{coll.BFloat16, coll.Float16, coll.Float32, coll.Int8}
		cases, bad, refused := 0, 0, 0
		start := time.Now()
		for _, size := range sizes {
			for _, dt := range dts {
				if size == 1<<30 && dt != coll.BFloat16 {
					continue
				}
				// An odd count, and (up to 16 MiB, the kernel's range) one
				// whose slice is a multiple of 16 bytes.
				count := size / int64(dt.Size()) / n
				if count%2 == 0 {
					count--
				}
				counts := []int64{count}
				if size <= 16<<20 {
					counts = append(counts, size/n/16*16/int64(dt.Size()))
				}
				for _, count := range counts {
					for _, inPlace := range []bool{false, true} {
						for _, algo := range algosOf(tg) {
							c := gatherCase{g: tg.G, gid: tg.gid, out: out, in: in, count: count, dt: dt, inPlace: inPlace, algo: algo}
							path, wrong := runGatherCase(t, tg, c, host, want)
							cases++
							if strings.HasPrefix(path.Reason, "refused: ") {
								refused++
							}
							if wrong != 0 {
								bad++
								t.Errorf("all_gather %s count=%d %v inPlace=%v algo=%s (path %s): %d wrong bytes", bench.FormatSize(size), count, dt, inPlace, algo, path.Algo, wrong)
							}
						}
					}
				}
			}
		}
		// Copy-engine variants (push, pull+push, split streams) on odd counts.
		for _, tu := range []ceTune{{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 1 << 20},
			{mode: modeBoth, split: 1, splitMin: 1 << 62, sideLocal: 0},
			{mode: modePull, split: 3, splitMin: 0, sideLocal: 0},
			{mode: modePush, split: 1, splitMin: 1 << 62, sideLocal: 0, batch: true},
			{mode: modePull, split: 1, splitMin: 1 << 62, sideLocal: 0}} {
			tg.G.runMu.Lock()
			tg.G.tune = tu
			tg.G.runMu.Unlock()
			for _, size := range []int64{4 << 10, 8<<20 + 6, 64 << 20} {
				for _, inPlace := range []bool{false, true} {
					count := size/2/n - 1
					c := gatherCase{g: tg.G, gid: tg.gid, out: out, in: in, count: count, dt: coll.BFloat16, inPlace: inPlace, algo: coll.AlgoCE}
					_, wrong := runGatherCase(t, tg, c, host, want)
					cases++
					if wrong != 0 {
						bad++
						t.Errorf("ce variant %+v size %d inPlace=%v: %d wrong bytes", tu, size, inPlace, wrong)
					}
				}
			}
		}
		tg.G.tune = defaultTune()
		logf(env, "CORRECTNESS all_gather: %d cases, %d wrong, %d refused (NCCL in-place misaligned guard), %.1fs (sizes 4K..1G odd counts, bf16/fp16/fp32/int8, in/out-of-place, algos %v + ce variants)\n",
			cases, bad, refused, time.Since(start).Seconds(), algosOf(tg))
	})
}

// TestGPUTwoGroupsOnePool: two groups share one pool; each gathers in its
// own blocks, alternating, and both stay correct.
func TestGPUTwoGroupsOnePool(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		g2, gid2, err := tg.AddGroup(context.Background(), "second", allRanks(tg.Size()))
		if err != nil {
			t.Fatal(err)
		}
		n := int64(tg.Size())
		o1, err := tg.Alloc(32<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		i1, err := tg.Alloc(16<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		o2, err := tg.AllocIn(gid2, 32<<20)
		if err != nil {
			t.Fatal(err)
		}
		i2, err := tg.AllocIn(gid2, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		host, want := make([]byte, 33<<20), make([]byte, 17<<20)
		for i := 0; i < 6; i++ {
			count := int64(1<<20*(i+1)+1) / n
			for _, c := range []gatherCase{
				{g: tg.G, gid: tg.gid, out: o1, in: i1, count: count, dt: coll.BFloat16, inPlace: i%2 == 0, algo: coll.AlgoCE},
				{g: g2, gid: gid2, out: o2, in: i2, count: count, dt: coll.BFloat16, inPlace: i%2 == 1, algo: coll.AlgoCE},
			} {
				if _, wrong := runGatherCase(t, tg, c, host, want); wrong != 0 {
					t.Errorf("group %s round %d: %d wrong bytes", c.g.Name(), i, wrong)
				}
			}
		}
		st := tg.Pool.Stats()
		logf(env, "TWO GROUPS one pool: ok=%v pool stats %+v, registered world=%d second=%d\n", !t.Failed(), st, tg.G.Registered(), g2.Registered())
	})
}

// TestGPURegistrationMismatch: ranks registering different segments get an
// error wrapping pool.ErrMismatch, quickly, never a hang.
func TestGPURegistrationMismatch(t *testing.T) {
	asRanks(t, func(t *testing.T, env rendezvous.Env) {
		tg := newTarget(t, env)
		bg, _, err := tg.AddGroup(context.Background(), "mismatch", allRanks(tg.Size()))
		if err != nil {
			t.Fatal(err)
		}
		gran := tg.B.gran
		var segs []pool.Segment
		for _, id := range []pool.SegmentID{1001, 1002} {
			base, err := tg.B.prov.CreateSegment(id, gran)
			if err != nil {
				t.Fatal(err)
			}
			segs = append(segs, pool.Segment{ID: id, Base: base, Size: gran})
		}
		seg := segs[env.Rank%2] // rank 0 registers 1001, rank 1 registers 1002
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		err = bg.Register(ctx, seg)
		if !errors.Is(err, pool.ErrMismatch) {
			t.Fatalf("mismatched registration: got %v, want an error wrapping pool.ErrMismatch", err)
		}
		logf(env, "REGISTRATION MISMATCH: error after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		for _, s := range segs {
			if err := tg.B.prov.ReleaseSegment(s.ID); err != nil {
				t.Error(err)
			}
		}
	})
}
