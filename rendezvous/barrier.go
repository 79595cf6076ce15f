package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Barrier returns once n participants have called Barrier with the same name.
// A name may be reused: each group of n arrivals forms one generation. On
// timeout the error says how many of the n arrived.
func (c *Client) Barrier(ctx context.Context, name string, n int) error {
	if n <= 0 {
		return fmt.Errorf("rendezvous: Barrier %q: participant count %d must be positive", name, n)
	}
	if name == "" {
		return errors.New("rendezvous: Barrier needs a name")
	}
	countKey := "symmem/barrier/" + name + "/count"
	cnt, err := c.Add(ctx, countKey, 1)
	if err != nil {
		return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
	}
	gen := (cnt - 1) / int64(n)
	doneKey := "symmem/barrier/" + name + "/done/" + strconv.FormatInt(gen, 10)
	if cnt == (gen+1)*int64(n) {
		if err := c.Set(ctx, doneKey, nil); err != nil {
			return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
		}
		return nil
	}
	if _, err := c.Wait(ctx, doneKey); err != nil {
		if errors.Is(err, ErrTimeout) {
			arrived := "unknown"
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2e9)
			if v, gerr := c.Get(gctx, countKey); gerr == nil {
				if total, perr := strconv.ParseInt(string(v), 10, 64); perr == nil {
					arrived = strconv.FormatInt(total-gen*int64(n), 10)
				}
			}
			cancel()
			return fmt.Errorf("rendezvous: barrier %q: only %s of %d participants arrived: %w", name, arrived, n, err)
		}
		return fmt.Errorf("rendezvous: barrier %q: %w", name, err)
	}
	return nil
}
