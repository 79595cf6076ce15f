package symmem

import (
	"context"
	"fmt"
	"time"

	"testing"
)

func init() { roles["no-memory"] = roleNoMemory }

// TestNoMemory: an allocation far beyond the host's memory fails at once
// with ErrNoMemory naming the size and the limit (instead of succeeding
// lazily and being ended by the OOM killer when touched); CheckFits says
// the same up front; ordinary allocations still work afterwards.
func TestNoMemory(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "no-memory"))
}

func roleNoMemory(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	const huge = 1 << 40 // 1 TiB
	if err := expectErr("CheckFits(1 TiB)", w.CheckFits(huge), ErrNoMemory, "1024.0 GiB", "available"); err != nil {
		return err
	}
	sc, err := w.World().OpenScope()
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = sc.Alloc(huge)
	if err := expectErr("Alloc(1 TiB)", err, ErrNoMemory, "asked", "available"); err != nil {
		return err
	}
	if d := time.Since(start); d > time.Second {
		return fmt.Errorf("the refusal took %v", d)
	}
	if w.Rank() == 0 {
		fmt.Println(err)
	}
	if _, err := sc.Alloc(1 << 20); err != nil {
		return err
	}
	if err := sc.End(ctx); err != nil {
		return err
	}
	return w.CheckFits(1 << 20)
}
