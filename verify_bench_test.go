package symmem

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

// The cost of always-on verification (results/verify-cost-*.md).
//
// BenchmarkCallRecord is the host work a collective adds to build its
// argument record; internal/backend/shm's BenchmarkRecordCheck the work to publish
// and compare it on the pads; pool's BenchmarkScopeEndInBand the pool's
// side of a Scope.End. BenchmarkLoop2Ranks runs two real processes: each
// times b.N scope ends that create no segment and b.N 4-byte all-reduces
// back to back (the time is the maximum over the ranks).

func init() { roles["verify-loop"] = roleVerifyLoop }

func BenchmarkCallRecord(b *testing.B) {
	c := call{kind: coll.AllReduce, dt: coll.Float32, op: coll.Sum, in: coll.Span{Ptr: 1 << 20, Len: 4096}, out: coll.Span{Ptr: 2 << 20, Len: 4096}, count: 1024}
	req := backend.Request{InSym: backend.Sym{OK: true, Seg: 1, Off: 4096}, OutSym: backend.Sym{OK: true, Seg: 1, Off: 8192}}
	var sink uint64
	for b.Loop() {
		sink += c.record(req, false)[3]
	}
	_ = sink
}

func BenchmarkLoop2Ranks(b *testing.B) {
	for _, what := range []string{"scope-end", "all-reduce-4B"} {
		b.Run(what, func(b *testing.B) {
			res := spawn(b, 2, "verify-loop", "SYMMEM_VB_WHAT="+what, "SYMMEM_VB_N="+strconv.Itoa(b.N))
			var worst float64
			for r, x := range res {
				if x.code != 0 {
					b.Fatalf("rank %d exited %d: %s", r, x.code, x.out)
				}
				v, err := strconv.ParseFloat(strings.TrimSpace(x.out), 64)
				if err != nil {
					b.Fatalf("rank %d printed %q", r, x.out)
				}
				worst = max(worst, v)
			}
			b.ReportMetric(worst, "ns/call")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func roleVerifyLoop(ctx context.Context) error {
	o := testOptions()
	if b := os.Getenv("SYMMEM_VB_BACKEND"); b != "" { // cuda: the same loop on the GPU backend
		o.Backend = b
	}
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	bufs, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	n := envInt("SYMMEM_VB_N", 1000)
	one := func() error {
		sc, err := g.OpenScope()
		if err != nil {
			return err
		}
		return sc.End(ctx)
	}
	if os.Getenv("SYMMEM_VB_WHAT") == "all-reduce-4B" {
		s := coll.Span{Ptr: bufs.in.Ptr, Len: 4}
		one = func() error {
			_, err := g.AllReduce(ctx, s, s, coll.Float32, coll.Sum)
			return err
		}
	}
	for range 100 {
		if err := one(); err != nil {
			return err
		}
	}
	start := time.Now()
	for range n {
		if err := one(); err != nil {
			return err
		}
	}
	fmt.Println(float64(time.Since(start).Nanoseconds()) / float64(n))
	return nil
}
