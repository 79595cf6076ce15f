package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// barrierStepWait is the least time a barrier's own store steps (arrive,
// announce the generation, withdraw) get, whatever is left of the caller's
// ctx.
const barrierStepWait = 2 * time.Second

// Barrier returns once n participants have called Barrier with the same name.
// A name may be reused: each group of n arrivals forms one generation. A
// participant whose wait fails (timeout, cancel) withdraws its arrival, so
// its generation still needs n and later ones are not one short; if the
// generation completed first, it returns nil. On timeout the error says how
// many of the n arrived.
func (c *Client) Barrier(ctx context.Context, name string, n int) error {
	if n <= 0 {
		return fmt.Errorf("rendezvous: Barrier %q: participant count %d must be positive", name, n)
	}
	if name == "" {
		return errors.New("rendezvous: Barrier needs a name")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
	}
	// Arriving and announcing run to their end even if ctx is cancelled
	// meanwhile: an arrival cut off after the store counted it could not be
	// withdrawn, and an unannounced generation holds the others until their
	// timeouts.
	sctx, cancel := barrierStep(ctx)
	defer cancel()
	countKey := "symmem/barrier/" + name + "/count"
	cnt, err := c.Add(sctx, countKey, 1)
	if err != nil {
		return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
	}
	gen := (cnt - 1) / int64(n)
	doneKey := "symmem/barrier/" + name + "/done/" + strconv.FormatInt(gen, 10)
	if cnt == (gen+1)*int64(n) {
		if err := c.Set(sctx, doneKey, nil); err != nil {
			return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
		}
		return nil
	}
	_, err = c.Wait(ctx, doneKey)
	if err == nil {
		return nil
	}
	wctx, wcancel := barrierStep(ctx)
	defer wcancel()
	arrived, complete, werr := c.withdraw(wctx, countKey, gen, int64(n))
	switch {
	case werr != nil:
		return fmt.Errorf("rendezvous: barrier %q: %w (its arrival could not be withdrawn, so the next round of %q may pass one short: %v)", name, err, name, werr)
	case complete:
		return nil
	case errors.Is(err, ErrTimeout):
		return fmt.Errorf("rendezvous: barrier %q: only %d of %d participants arrived: %w", name, arrived, n, err)
	}
	return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
}

// barrierStep is ctx without its cancellation, with ctx's deadline
// (DefaultCallTimeout without one) but at least barrierStepWait from now.
func barrierStep(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(DefaultCallTimeout)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), later(d, time.Now().Add(barrierStepWait)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// withdraw takes one arrival back from generation gen of a barrier of n
// while the generation is incomplete: every arrival above gen*n belongs to
// it, so counting one down undoes one of them, and compare-and-set makes
// the check and the decrement one step against concurrent arrivals.
// arrived is the generation's count with this participant; complete says
// the n-th arrival came first (nothing withdrawn: the barrier passed).
func (c *Client) withdraw(ctx context.Context, countKey string, gen, n int64) (arrived int64, complete bool, err error) {
	cur, err := c.Get(ctx, countKey)
	for err == nil {
		total, perr := strconv.ParseInt(string(cur), 10, 64)
		if perr != nil {
			return 0, false, fmt.Errorf("count %q is not a decimal integer", cur)
		}
		if total >= (gen+1)*n {
			return n, true, nil
		}
		var swapped bool
		cur, swapped, err = c.CompareSet(ctx, countKey, cur, strconv.AppendInt(nil, total-1, 10))
		if err == nil && swapped {
			return total - gen*n, false, nil
		}
	}
	return 0, false, err
}
