package nccl

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// window is one registered range.
type window struct {
	ptr  uint64
	size int64
	win  libnccl.Window // 0: NCCL accepted the registration but made no window
}

// Window describes a registered range.
type Window struct {
	Ptr  uint64
	Size int64
	// Symmetric is true when NCCL made a symmetric window (its symmetric
	// kernels can run on buffers inside). False means NCCL accepted the
	// registration but this communicator has no symmetric support (e.g. its
	// ranks are not all NVLink peers on one node).
	Symmetric bool
}

// Register makes [ptr, ptr+size) an NCCL window of this communicator
// (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC). It is collective:
// every rank registers a range of the same size, in the same order. ptr and
// size must be multiples of 4096 and the memory must be CUDA VMM memory
// (cuMemCreate-backed, as pool segments are). A rank that does not arrive
// within the timeout makes this fail with libnccl.ErrTimeout; the communicator is
// then aborted (errs.Broken afterwards).
func (c *Comm) Register(ctx context.Context, ptr uint64, size int64) error {
	if ptr == 0 || size <= 0 {
		return fmt.Errorf("nccl: group %q: register %#x (+%d): need a non-null pointer and a positive size", c.group, ptr, size)
	}
	if ptr%libnccl.WinAlignment != 0 || size%libnccl.WinAlignment != 0 {
		return fmt.Errorf("nccl: group %q: register %#x (+%d): pointer and size must be multiples of %d (register whole pool segments)",
			c.group, ptr, size, libnccl.WinAlignment)
	}
	if !c.lib.HasWindows {
		return fmt.Errorf("nccl: group %q: %w: %s has no ncclCommWindowRegister (NCCL %s; windows need >= %s); use plain NCCL",
			c.group, errs.NotSupported, c.lib.Path, c.lib.VersionString(), libnccl.VersionString(libnccl.MinWindowVersion))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	i := sort.Search(len(c.wins), func(i int) bool { return c.wins[i].ptr+uint64(c.wins[i].size) > ptr })
	if i < len(c.wins) && c.wins[i].ptr < ptr+uint64(size) {
		w := c.wins[i]
		return fmt.Errorf("nccl: group %q: register %#x (+%d): overlaps the window %#x (+%d) already registered; NCCL refuses double registration",
			c.group, ptr, size, w.ptr, w.size)
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var win libnccl.Window
	var err error
	if c.cfg.NonBlocking {
		win, err = c.lib.WindowRegister(wctx, c.cuctx, c.h.Comm, ptr, size, libnccl.WinCollSymmetric)
	} else {
		win, err = bounded(wctx, "ncclCommWindowRegister", func() (libnccl.Window, error) {
			return c.lib.WindowRegister(context.Background(), c.cuctx, c.h.Comm, ptr, size, libnccl.WinCollSymmetric)
		})
		if errors.Is(err, libnccl.ErrTimeout) {
			// Still inside NCCL on another thread: no abort (see bounded).
			c.wins = nil
			c.broken = fmt.Errorf("nccl: group %q rank %d: %w: registering window %#x (+%d): %w", c.group, c.rank, errs.Broken, ptr, size, err)
			return c.broken
		}
	}
	if err != nil {
		if errors.Is(err, libnccl.ErrTimeout) {
			return c.fail(fmt.Errorf("registering window %#x (+%d): a rank did not register in time: %w", ptr, size, err))
		}
		var ne *libnccl.Error
		if errors.As(err, &ne) {
			// An asynchronous failure leaves the communicator in error.
			if st, serr := c.lib.AsyncError(c.h.Comm); serr == nil && st != libnccl.Success && st != libnccl.InProgress {
				return c.fail(err)
			}
		}
		return fmt.Errorf("nccl: group %q rank %d: register %#x (+%d): %w", c.group, c.rank, ptr, size, err)
	}
	c.wins = append(c.wins, window{})
	copy(c.wins[i+1:], c.wins[i:])
	c.wins[i] = window{ptr: ptr, size: size, win: win}
	return nil
}

// Deregister removes the window registered at exactly ptr. Every rank
// deregisters the same windows; no collective using it may be in flight.
func (c *Comm) Deregister(ctx context.Context, ptr uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	i := sort.Search(len(c.wins), func(i int) bool { return c.wins[i].ptr >= ptr })
	if i == len(c.wins) || c.wins[i].ptr != ptr {
		return fmt.Errorf("nccl: group %q: deregister %#x: no window starts there (registered: %d windows)", c.group, ptr, len(c.wins))
	}
	if err := c.lib.WindowDeregister(c.cuctx, c.h.Comm, c.wins[i].win); err != nil {
		return fmt.Errorf("nccl: group %q rank %d: deregister %#x: %w", c.group, c.rank, ptr, err)
	}
	c.wins = append(c.wins[:i], c.wins[i+1:]...)
	return nil
}

// Windows lists the registered ranges in address order.
func (c *Comm) Windows() []Window {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Window, len(c.wins))
	for i, w := range c.wins {
		out[i] = Window{Ptr: w.ptr, Size: w.size, Symmetric: w.win != 0}
	}
	return out
}

// Windowed reports whether [ptr, ptr+n) lies inside one symmetric window.
func (c *Comm) Windowed(ptr uint64, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.windowedLocked(ptr, n)
}

func (c *Comm) windowedLocked(ptr uint64, n int64) bool {
	i := sort.Search(len(c.wins), func(i int) bool { return c.wins[i].ptr+uint64(c.wins[i].size) > ptr })
	if i == len(c.wins) {
		return false
	}
	w := c.wins[i]
	return w.win != 0 && w.ptr <= ptr && ptr+uint64(n) <= w.ptr+uint64(w.size)
}
