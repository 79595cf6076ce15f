package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// AllGather is a small all-gather through the store for the members of a
// group (ranks: their world ranks; me: this rank's index in it). Every member
// calls it with the same key prefix, which must be fresh per call (e.g. it
// ends in a sequence number). It returns every member's bytes by index. The
// last member to finish deletes the keys, so nothing accumulates in the
// store. A timeout names the ranks that never arrived.
func (c *Client) AllGather(ctx context.Context, prefix string, ranks []int, me int, mine []byte) ([][]byte, error) {
	return c.AllGatherWatched(ctx, prefix, ranks, me, mine, nil)
}

// AllGatherWatched is AllGather whose wait for the parts also ends when
// watch, run beside that wait on its own goroutine, returns an error (a
// peer gone in a way the store cannot see): that error is returned as it
// is. watch gets the parts' keys by index and a context that ends with
// the wait (it returns nil then). Once every part arrived, the watch
// cannot fail the call.
func (c *Client) AllGatherWatched(ctx context.Context, prefix string, ranks []int, me int, mine []byte, watch func(ctx context.Context, keys []string) error) ([][]byte, error) {
	keys := make([]string, len(ranks))
	for r := range keys {
		keys[r] = prefix + "/" + strconv.Itoa(r)
	}
	if err := c.Set(ctx, keys[me], mine); err != nil {
		return nil, err
	}
	vals, watchErr, err := c.waitWatched(ctx, keys, watch)
	switch {
	case watchErr != nil:
		return nil, watchErr
	case err != nil:
		return nil, fmt.Errorf("%s never arrived: %w", c.missing(keys, ranks), err)
	}
	cnt, err := c.Add(ctx, prefix+"/done", 1)
	if err != nil {
		return nil, err
	}
	if cnt == int64(len(ranks)) {
		for _, k := range append(keys, prefix+"/done") {
			if err := c.Delete(ctx, k); err != nil && !errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("cleanup: %w", err)
			}
		}
	}
	return vals, nil
}

// waitWatched waits for keys, with watch (if any) beside it; watchErr is
// watch's error when it ended a wait that had not completed.
func (c *Client) waitWatched(ctx context.Context, keys []string, watch func(context.Context, []string) error) (vals [][]byte, watchErr, err error) {
	if watch == nil {
		vals, err = c.Wait(ctx, keys...)
		return vals, nil, err
	}
	wctx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if werr := watch(wctx, keys); werr != nil {
			watchErr = werr
			stop(werr)
		}
	}()
	vals, err = c.Wait(wctx, keys...)
	stop(nil)
	<-done
	if err == nil {
		return vals, nil, nil
	}
	return nil, watchErr, err
}

// missing names the ranks whose keys are absent (best effort, for errors).
func (c *Client) missing(keys []string, ranks []int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var gone []string
	for r, k := range keys {
		if _, err := c.Get(ctx, k); err != nil {
			gone = append(gone, strconv.Itoa(ranks[r]))
		}
	}
	if len(gone) == 0 {
		return "some rank's value"
	}
	return "the value of rank(s) " + strings.Join(gone, ", ")
}

// Swap sends fd to every other member of a group (ranks: world ranks; me:
// this rank's index) under tag and hands each member's fd to take(index, fd),
// closing it afterwards. It stops at the first error, discarding what the
// members send under tag (Discard); the caller undoes what take did.
func (x *FDExchange) Swap(ctx context.Context, tag string, ranks []int, me int, fd int, take func(r, fd int) error) (err error) {
	defer func() {
		if err != nil {
			x.Discard(tag, ranks)
		}
	}()
	for r, gr := range ranks {
		if r == me {
			continue
		}
		if err := x.Send(ctx, gr, tag, []int{fd}); err != nil {
			return fmt.Errorf("sending %s to rank %d: %w", tag, gr, err)
		}
	}
	for r, gr := range ranks {
		if r == me {
			continue
		}
		fds, err := x.Recv(ctx, gr, tag)
		if err != nil {
			return fmt.Errorf("receiving %s from rank %d: %w", tag, gr, err)
		}
		if len(fds) != 1 {
			for _, f := range fds {
				unix.Close(f)
			}
			return fmt.Errorf("rank %d sent %d descriptors for %s, want 1", gr, len(fds), tag)
		}
		err = take(r, fds[0])
		unix.Close(fds[0])
		if err != nil {
			return fmt.Errorf("rank %d's %s: %w", gr, tag, err)
		}
	}
	return nil
}
