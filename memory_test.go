package symmem

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

func init() {
	roles["no-memory"] = roleNoMemory
	roles["alloc-local"] = roleAllocLocal
}

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

// TestAllocLocal: an AllocLocal buffer on the CPU backend serves a
// collective (staged), reads as Bytes until it is freed and nil after, and
// a second Free is ErrFreed (before, Bytes of a freed one returned memory
// the Go runtime may have reused, and the second Free said "not allocated
// by AllocLocal").
func TestAllocLocal(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "alloc-local"))
}

func roleAllocLocal(ctx context.Context) error {
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	defer w.Close()
	b, err := w.AllocLocal(64)
	if err != nil {
		return err
	}
	x := b.Bytes()
	for i := range x {
		x[i] = byte(w.Rank() + 1)
	}
	p, err := w.World().AllReduce(ctx, b.Span, b.Span, coll.Uint8, coll.Sum)
	if err != nil {
		return err
	}
	if !p.Staged || x[0] != 3 || x[63] != 3 {
		return fmt.Errorf("all-reduce of an AllocLocal buffer: %+v, bytes %d..%d, want staged and 3", p, x[0], x[63])
	}
	if err := w.Free(b); err != nil {
		return err
	}
	if b.Bytes() != nil {
		return fmt.Errorf("Bytes of a freed AllocLocal buffer is not nil")
	}
	return expectErr("second Free", w.Free(b), ErrFreed, "freed before")
}
