package rendezvous

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// TestCancelAfterCallLeavesConnUsable: a call's context that ends just as
// the call returns (a watcher cancelling it when the answer came another
// way) must not leave its pooled connection with a past deadline, which
// made the next call on it fail at once with "i/o timeout" (seen once in
// `symmem bench` on the CPU backend).
func TestCancelAfterCallLeavesConnUsable(t *testing.T) {
	_, c := newStore(t)
	for i := range 3000 {
		ctx, cancel := context.WithCancel(context.Background())
		go cancel() // races the call's end
		c.Add(ctx, "race", 1)
		if _, err := c.Add(tctx(t, 10*time.Second), "after", 1); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("iteration %d: the call after a cancelled one failed at once: %v", i, err)
			}
			t.Fatal(err)
		}
	}
}
