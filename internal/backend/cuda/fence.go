package cuda

import (
	"fmt"
	"sync"

	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/pool"
)

// eventFence is a pool.Fence over a CUDA event; the event is destroyed once
// it has been seen complete (the pool stops polling a done fence).
type eventFence struct {
	mu   sync.Mutex
	ev   *cudadrv.Event
	done bool
}

func (f *eventFence) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done && f.ev.Done() {
		f.done = true
		f.ev.Destroy()
	}
	return f.done
}

// Fence returns a pool.Fence that completes when the work enqueued so far on
// stream (0: the backend's own stream) has finished. Freeing a block with it
// lets the pool hand the block out again without waiting now, and makes the
// next owner of those bytes wait until the device no longer uses them.
func (b *Backend) Fence(stream uint64) (pool.Fence, error) {
	s := b.stream
	if stream != 0 {
		s = cudadrv.WrapStream(b.ctx, stream)
	}
	ev, err := cudadrv.NewEvent(b.ctx, false)
	if err != nil {
		return nil, fmt.Errorf("cuda: fence: %w", err)
	}
	if err := ev.Record(s); err != nil {
		ev.Destroy()
		return nil, fmt.Errorf("cuda: fence: %w", err)
	}
	return &eventFence{ev: ev}, nil
}
