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
	keys := make([]string, len(ranks))
	for r := range keys {
		keys[r] = prefix + "/" + strconv.Itoa(r)
	}
	if err := c.Set(ctx, keys[me], mine); err != nil {
		return nil, err
	}
	vals, err := c.Wait(ctx, keys...)
	if err != nil {
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
// closing it afterwards. It stops at the first error; the caller undoes what
// take did.
func (x *FDExchange) Swap(ctx context.Context, tag string, ranks []int, me int, fd int, take func(r, fd int) error) error {
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
