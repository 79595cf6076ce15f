package symmem

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func init() {
	roles["groupid-close"] = roleGroupIDClose
}

// TestCloseAfterGroupIDReuse: a one-rank group on rank 0 (rank 1 is not a
// member, so its pool never adds it) is created and closed between two
// world-wide groups. Rank 0's pool reuses the closed group's id for the
// later group, rank 1's does not (rank 0: world, y, x; rank 1: world, x,
// y). World.Close removes the groups in creation order, alike on every
// rank; in id order the ranks waited for each other in different groups
// until the timeout and Close failed everywhere (found by review).
func TestCloseAfterGroupIDReuse(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "groupid-close"))
}

func roleGroupIDClose(ctx context.Context) error {
	o := testOptions()
	o.Timeout = 5 * time.Second
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	s, err := w.NewGroup(ctx, "solo", []int{0})
	if err != nil {
		return err
	}
	if _, err := w.NewGroup(ctx, "x", []int{0, 1}); err != nil {
		return err
	}
	if err := s.Close(ctx); err != nil {
		return err
	}
	if _, err := w.NewGroup(ctx, "y", []int{0, 1}); err != nil {
		return err
	}
	start := time.Now()
	err = w.Close()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("World.Close after %v: %w", took.Round(time.Millisecond), err)
	}
	return nil
}
