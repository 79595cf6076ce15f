package symmem

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
)

func init() { roles["explain-staged"] = roleExplainStaged }

// TestExplainStaged: `symmem doctor` / World.Explain describe a staged
// (ordinary-memory) all-reduce by the plan its rounds take: in place on the
// staging buffer. On the CPU backend the one-shot limit differs by
// placement (1 MiB out of place, 64 KiB in place); doctor's 1 MiB row said
// one-shot (an out-of-place request's plan) where the call runs two-shot
// (found by review).
func TestExplainStaged(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "explain-staged"))
}

func roleExplainStaged(ctx context.Context) error {
	// Default options, as `symmem doctor` runs (8 MiB staging buffer).
	w, err := Init(ctx, Options{Backend: "cpu", Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	const bytes = 1 << 20
	said := w.Explain(coll.AllReduce, bytes, false)

	// The request staged() hands the backend for this call (one round: 1 MiB
	// fits the 8 MiB buffer): same count, in place on the staging buffer.
	req := g.explainRequest(coll.AllReduce, bytes, false)
	st := g.sym(g.staging)
	r := req
	r.InPlace = true
	r.In, r.InSym = coll.Span{Ptr: g.staging.Ptr, Len: bytes}, backend.Sym{OK: true, Seg: st.Seg, Off: st.Off}
	r.Out, r.OutSym = r.In, r.InSym
	runs := g.bg.Explain(r.Shaped(g.Size(), g.Rank()))
	if !strings.Contains(said.Reason, runs.Reason) || !strings.Contains(said.Reason, "in 1 round(s), in place") {
		return fmt.Errorf("Explain(all_reduce, 1M, ordinary) says %q; the staged call's round: %q", said.Reason, runs.Reason)
	}
	oneShotSaid := strings.Contains(said.Reason, "one-shot")
	oneShotRuns := strings.Contains(runs.Reason, "one-shot")
	if oneShotSaid != oneShotRuns {
		return fmt.Errorf("Explain(all_reduce, 1M, ordinary) says %q, but the staged call's in-place rounds take %q", said.Reason, runs.Reason)
	}
	// A call of no element per rank is an empty call, whatever the memory:
	// it succeeds (Explain said "the call fails" for ordinary memory).
	for _, sym := range []bool{true, false} {
		for _, k := range coll.Kinds() {
			p := w.Explain(k, 0, sym)
			if p.Algo != coll.AlgoDirect || !strings.Contains(p.Reason, "empty call") {
				return fmt.Errorf("Explain(%v, 0 bytes, symmetric %v) = %v (%q), want the empty call's direct path", k, sym, p.Algo, p.Reason)
			}
		}
	}
	// All-to-all's staged rounds are out of place, each rank copying its
	// block of every peer's input.
	if p := w.Explain(coll.AllToAll, bytes, false); !p.Staged || !strings.Contains(p.Reason, "out of place") || !strings.Contains(p.Reason, "its block of every peer's input") {
		return fmt.Errorf("Explain(all_to_all, 1M, ordinary) = %v, want staged out of place, naming the direct path", p)
	}
	if p, err := g.AllReduce(ctx, coll.Span{}, coll.Span{}, coll.BFloat16, coll.Sum); err != nil || p.Algo != coll.AlgoDirect {
		return fmt.Errorf("an empty all-reduce: %v, %v", p, err)
	}
	return nil
}
