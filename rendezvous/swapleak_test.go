package rendezvous

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSwapFailureClosesFDs: three local ranks Swap a memfd each; on rank 0
// take() fails for rank 1, so Swap returns at once. Rank 2's descriptor
// (delivered already, or later) is closed, not left in rank 0's mailbox
// under a tag nobody will Recv again, pinning the peer's segment for the
// whole World (found by review).
func TestSwapFailureClosesFDs(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	const n = 3
	xs := make([]*FDExchange, n)
	for r := range n {
		x, err := NewFDExchange(testEnv(r, n, tok, job))
		if err != nil {
			t.Fatal(err)
		}
		xs[r] = x
		defer x.Close()
	}
	mine := make([]int, n)
	for r := range n {
		fd, err := unix.MemfdCreate("seg", unix.MFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		mine[r] = fd
		defer unix.Close(fd)
	}
	time.Sleep(50 * time.Millisecond) // let accept loops settle
	before := countFDs(t)

	ranks := []int{0, 1, 2}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs[r] = xs[r].Swap(ctx, "grp/seg/1", ranks, r, mine[r], func(peer, fd int) error {
				if r == 0 && peer == 1 {
					return errors.New("cannot map rank 1's segment")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if errs[0] == nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("unexpected swap results: %v", errs)
	}
	// Give any in-flight receive goroutine time to file its descriptors.
	time.Sleep(200 * time.Millisecond)
	if after := countFDs(t); after != before {
		t.Fatalf("Swap failed on rank 0 and returned, yet %d descriptor(s) stay open in this process (before %d, after %d): rank 2's segment fd is parked in rank 0's mailbox under tag %q until FDExchange.Close",
			after-before, before, after, "grp/seg/1")
	}
}
