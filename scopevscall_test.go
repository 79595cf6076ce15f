package symmem

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

func init() {
	roles["scope-vs-call"] = roleScopeVsCall
}

// TestScopeEndVsCollective3: ranks 0 and 1 end a world scope after
// allocating different sizes; rank 2 runs an all-reduce instead (it skipped
// the scope). Every rank gets ErrMismatch at once. The in-band agreement
// names rank 1's difference (two scope ends at one position), and ranks 0
// and 1 went on to name the allocation through the store, which rank 2, in
// a collective, never joined: they waited out the timeout and failed with a
// timeout (found by review). Now every rank sees that not every rank ends a
// scope (Disagreement.AllKind). Rank 2 stays alive meanwhile, as a
// rank going on with its work would (exiting, its peers would fail fast
// with ErrPeerClosed).
func TestScopeEndVsCollective3(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 3, "scope-vs-call"))
}

func roleScopeVsCall(ctx context.Context) error {
	o := testOptions()
	o.Checked = false
	o.Timeout = 6 * time.Second
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	me := w.Rank()
	start := time.Now()
	if me == 2 {
		_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	} else {
		sc, e := g.OpenScope()
		if e != nil {
			return e
		}
		if _, e := sc.Alloc(int64(4096 * (me + 1))); e != nil {
			return e
		}
		err = sc.End(ctx)
	}
	took := time.Since(start)
	if me == 2 {
		// Rank 2 stays in the job (as a rank that goes on with its work
		// would) until its peers are done with this step.
		defer time.Sleep(o.Timeout + time.Second)
	}
	if e := expectMismatch(fmt.Sprintf("rank %d (after %v)", me, took.Round(time.Millisecond)), err); e != nil {
		return e
	}
	if took > 2*time.Second {
		return fmt.Errorf("mismatch reported after %v (timeout %v): %v", took.Round(time.Millisecond), o.Timeout, err)
	}
	return nil
}
