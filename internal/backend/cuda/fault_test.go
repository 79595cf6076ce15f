package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

func callRec(k coll.Kind, dt coll.DType, count uint64) agree.Record {
	return agree.Record{agree.RecCall<<56 | uint64(k)<<48 | uint64(dt)<<40 | uint64(coll.Sum)<<32, 0, count, 1<<48 | 0x1000, 1<<48 | 0x2000}
}

// TestCallRing: the newest record of a digest is found, and a call older than recentCalls is gone.
func TestCallRing(t *testing.T) {
	var r callRing
	if _, ok := r.find(1); ok {
		t.Fatal("an empty ring found a record")
	}
	first := callRec(coll.AllReduce, coll.Float32, 1)
	r.add(agree.Digest(agree.Call{Record: first}), &first, "")
	for i := range uint64(recentCalls - 1) {
		rec := callRec(coll.AllGather, coll.BFloat16, 100+i)
		r.add(agree.Digest(agree.Call{Record: rec}), &rec, "")
	}
	if got, ok := r.find(agree.Digest(agree.Call{Record: first})); !ok || got.Record != first {
		t.Fatalf("the oldest of %d calls: find = %x, %v; want it", recentCalls, got, ok)
	}
	last := callRec(coll.AllGather, coll.BFloat16, 99)
	r.add(agree.Digest(agree.Call{Record: last}), &last, "")
	if _, ok := r.find(agree.Digest(agree.Call{Record: first})); ok {
		t.Fatalf("a call %d calls old was still found", recentCalls+1)
	}
	if got, ok := r.find(agree.Digest(agree.Call{Record: last})); !ok || got.Record != last {
		t.Fatalf("the newest call: find = %x, %v", got, ok)
	}
}

// BenchmarkCallDigest is the host work a kernel launch adds for the check:
// the digest and the ring entry.
func BenchmarkCallDigest(b *testing.B) {
	g := &Group{}
	req := backend.Request{Record: callRec(coll.AllReduce, coll.Float32, 1024)}
	var sink uint32
	for i := 0; b.Loop(); i++ {
		req.Record[2] = uint64(i) // a new call each time (no repeat to skip)
		sink += g.faults.digest(&req)
	}
	_ = sink
}

// reportGroups makes n fake groups (no GPU) of one store namespace, joined
// to a real store server.
func reportGroups(t *testing.T, n int, timeout time.Duration) []*Group {
	t.Helper()
	srv, err := rendezvous.NewServer("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	gs := make([]*Group, n)
	for r := range gs {
		c, err := rendezvous.Dial(context.Background(), srv.Addr(), "tok")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		gs[r] = &Group{core: core{Head: members.Head{GroupName: "t", Ranks: make([]int, n), Me: r, Store: c, Prefix: "test/cuda/t#0", Timeout: timeout}}}
		gs[r].faults.g = &gs[r].core
		for q := range n {
			gs[r].Ranks[q] = 10 + q // world ranks differ from group ranks
		}
	}
	return gs
}

// TestFaultNamesArgument: the kernels' report becomes an error naming the
// differing argument with both values on every rank (both sides of each
// differing pair swap records through the store); a record the ring lost
// or a peer that never answers leaves the digests, within the bound.
func TestFaultNamesArgument(t *testing.T) {
	f32, bf16 := callRec(coll.AllReduce, coll.Float32, 4096), callRec(coll.AllReduce, coll.BFloat16, 8192)
	h32, h16 := agree.Digest(agree.Call{Record: f32}), agree.Digest(agree.Call{Record: bf16})
	run := func(gs []*Group, reps []faultReport) []error {
		out := make([]error, len(gs))
		var wg sync.WaitGroup
		for r, g := range gs {
			if reps[r].peer < 0 {
				continue // this rank is elsewhere
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.runMu.Lock()
				defer g.runMu.Unlock()
				out[r] = g.faults.explain(reps[r])
			}()
		}
		wg.Wait()
		return out
	}

	t.Run("3 ranks", func(t *testing.T) {
		gs := reportGroups(t, 3, time.Minute)
		recs := []agree.Record{f32, bf16, bf16}
		for r, g := range gs {
			g.runMu.Lock()
			for i := range 10 { // other calls around it
				x := callRec(coll.AllGather, coll.Float32, uint64(i))
				g.faults.digest(&backend.Request{Record: x})
			}
			g.faults.digest(&backend.Request{Record: recs[r]})
			g.faults.digest(&backend.Request{Record: callRec(coll.AllGather, coll.Float32, 77)})
			g.runMu.Unlock()
		}
		// Rank 0's CTAs met rank 2 first; ranks 1 and 2 met rank 0.
		start := time.Now()
		errs3 := run(gs, []faultReport{{peer: 2, mine: h32, theirs: h16, epoch: 5}, {peer: 0, mine: h16, theirs: h32, epoch: 5}, {peer: 0, mine: h16, theirs: h32, epoch: 5}})
		want := []string{"rank 12 called all_reduce with dtype=bfloat16, rank 10 with dtype=float32",
			"rank 10 called all_reduce with dtype=float32, rank 11 with dtype=bfloat16",
			"rank 10 called all_reduce with dtype=float32, rank 12 with dtype=bfloat16"}
		for r, err := range errs3 {
			t.Log(err)
			if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), want[r]) || !strings.Contains(err.Error(), "launch 5") {
				t.Errorf("rank %d: %v\nwant ErrMismatch naming %q", r, err, want[r])
			}
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("naming took %v", el)
		}
		// The same pair again (another algorithm, the same arguments):
		// the keys of the first report still hold the records.
		for r, err := range run(gs[:2], []faultReport{{peer: 1, mine: h32, theirs: h16, epoch: 6}, {peer: 0, mine: h16, theirs: h32, epoch: 6}}) {
			if !strings.Contains(fmt.Sprint(err), "with dtype=") {
				t.Errorf("second report, rank %d: %v", r, err)
			}
		}
	})

	t.Run("kinds differ", func(t *testing.T) {
		gs := reportGroups(t, 2, time.Minute)
		ag := callRec(coll.AllGather, coll.Float32, 4096)
		recs := []agree.Record{f32, ag}
		for r, g := range gs {
			g.faults.digest(&backend.Request{Record: recs[r]})
		}
		errs2 := run(gs, []faultReport{{peer: 1, mine: h32, theirs: agree.Digest(agree.Call{Record: ag})}, {peer: 0, mine: agree.Digest(agree.Call{Record: ag}), theirs: h32}})
		if err := errs2[0]; !strings.Contains(fmt.Sprint(err), "rank 11 called all_gather, rank 10 all_reduce") {
			t.Errorf("rank 0: %v", err)
		}
	})

	t.Run("paths differ", func(t *testing.T) {
		gs := reportGroups(t, 2, time.Minute)
		algos := []coll.Algo{coll.AlgoKernel, coll.AlgoTwoShot}
		ds := make([]uint32, 2)
		for r, g := range gs {
			ds[r] = g.faults.digest(&backend.Request{Record: f32, Algo: algos[r]})
		}
		if ds[0] == ds[1] {
			t.Fatal("one digest for two paths")
		}
		// Rank 1's report comes from the handshake, which stopped its device.
		errs2 := run(gs, []faultReport{{peer: 1, mine: ds[0], theirs: ds[1]}, {peer: 0, mine: ds[1], theirs: ds[0], kind: kindStopped}})
		if err := errs2[0]; !errors.Is(err, errs.Mismatch) || !strings.Contains(fmt.Sprint(err), "rank 11 ran it on two-shot, rank 10 on kernel") ||
			!strings.Contains(fmt.Sprint(err), "were not written") {
			t.Errorf("rank 0: %v", err)
		}
		if err := fmt.Sprint(errs2[1]); !strings.Contains(err, "context is lost") || strings.Contains(err, "were not written") {
			t.Errorf("rank 1 (stopped): %v\nwant the lost context, no claim that the outputs are untouched", err)
		}
	})

	t.Run("aged out", func(t *testing.T) {
		gs := reportGroups(t, 2, time.Minute)
		gs[0].faults.digest(&backend.Request{Record: f32}) // rank 1 lost its record
		start := time.Now()
		for r, err := range run(gs, []faultReport{{peer: 1, mine: h32, theirs: h16}, {peer: 0, mine: h16, theirs: h32}}) {
			if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), fmt.Sprintf("%08x vs %08x", []uint32{h16, h32}[r], []uint32{h32, h16}[r])) ||
				!strings.Contains(err.Error(), "no longer holds") {
				t.Errorf("rank %d: %v\nwant the digests and why", r, err)
			}
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("a lost record took %v to report (both ranks published)", el)
		}
	})

	t.Run("peer silent", func(t *testing.T) {
		gs := reportGroups(t, 2, 300*time.Millisecond) // the bound is the timeout when smaller
		gs[0].faults.digest(&backend.Request{Record: f32})
		start := time.Now()
		err := run(gs, []faultReport{{peer: 1, mine: h32, theirs: h16}, {peer: -1}})[0]
		el := time.Since(start)
		t.Log(err)
		if !errors.Is(err, errs.Mismatch) || !strings.Contains(err.Error(), fmt.Sprintf("%08x vs %08x", h16, h32)) || !errors.Is(err, rendezvous.ErrTimeout) && !strings.Contains(err.Error(), "rank 11's record") {
			t.Errorf("silent peer: %v", err)
		}
		if el < 200*time.Millisecond || el > 2*time.Second {
			t.Errorf("silent peer: reported after %v, want the 300ms bound", el)
		}
	})
}
