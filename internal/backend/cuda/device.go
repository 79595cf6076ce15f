package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/internal/wait"
)

var _ backend.Device = (*Backend)(nil)

// Capabilities reports device memory, the GPU algorithms, and calls
// compared by their digest (agree.CallsByDigest: the kernels' signals, the
// gate).
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Algos: gpuAlgos, Calls: agree.CallsByDigest, Device: b}
}

// waitFor is how long a device wait may take under ctx.
func waitFor(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return wait.DefaultTimeout
}

// Write copies src to dst and returns once the bytes are in device memory
// and visible to every stream and peer. A pageable cuMemcpyHtoD may return
// before its DMA has landed, so a peer signalled through the host could
// read stale bytes (seen in 4 of 5 runs): cudadrv.CopyHtoD synchronizes the
// context after the copy, which orders it before anything issued afterwards
// on any stream, here or in a peer process.
func (b *Backend) Write(ctx context.Context, dst uint64, src []byte) error {
	if err := cudadrv.CopyHtoD(b.ctx, dst, src); err != nil {
		return fmt.Errorf("cuda backend: write: %w", err)
	}
	return nil
}

// Read waits for the backend's stream, then copies from the device.
func (b *Backend) Read(ctx context.Context, dst []byte, src uint64) error {
	if err := b.stream.Wait(ctx, waitFor(ctx)); err != nil {
		return fmt.Errorf("cuda backend: read: %w", err)
	}
	if err := cudadrv.CopyDtoH(b.ctx, dst, src); err != nil {
		return fmt.Errorf("cuda backend: read: %w", err)
	}
	return nil
}

// Copy enqueues a device-to-device copy of n bytes on stream (0: the
// backend's own), on a copy engine.
func (b *Backend) Copy(dst, src uint64, n int64, stream uint64) error {
	s := b.stream.Handle()
	if stream != 0 {
		s = stream
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.copyProg == nil {
		b.copyProg = cudadrv.NewProgram(4)
	}
	p := b.copyProg
	p.Reset()
	p.SetContext(b.ctx)
	p.Copy(s, dst, src, n)
	if err := p.Exec(); err != nil {
		return fmt.Errorf("cuda backend: copy of %d bytes: %w", n, err)
	}
	return nil
}

// Ordinal is the GPU's CUDA ordinal in this process.
func (b *Backend) Ordinal() int { return b.ctx.Dev }

// CheckLocal refuses an ordinary buffer that is not device memory of this
// GPU. A host address reaching a kernel or NCCL faults the context (every
// later call fails), and another GPU's memory is not what the call's stream
// orders.
func (b *Backend) CheckLocal(ptr uint64) error {
	t, dev, err := cudadrv.PointerInfo(ptr)
	if err != nil {
		return nil // cannot tell: the call itself will say
	}
	var what string
	switch {
	case (t == cudadrv.MemoryDevice || t == cudadrv.MemoryUnified) && dev == b.ctx.Dev:
		return nil
	case t == cudadrv.MemoryUnknown:
		what = "host memory"
	case t == cudadrv.MemoryHost:
		what = "page-locked host memory"
	default:
		what = fmt.Sprintf("memory of GPU %d", dev)
	}
	return fmt.Errorf("%#x is %s, not device memory of this rank's GPU %d (pass buffers on GPU %d): %w", ptr, what, b.ctx.Dev, b.ctx.Dev, errs.Invalid)
}

// AllocLocal returns a private VMM allocation of at least bytes, outside
// the pool (ordinary device memory).
func (b *Backend) AllocLocal(bytes int64) (uint64, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda backend: local alloc of %d bytes: the size must be positive", bytes)
	}
	size := (bytes + b.gran - 1) / b.gran * b.gran
	s, err := createLocal(b.ctx, size, b.gran)
	if err != nil {
		return 0, fmt.Errorf("cuda backend: local alloc of %d bytes: %w", bytes, err)
	}
	b.mu.Lock()
	if b.local == nil {
		b.local = map[uint64]*segment{}
	}
	b.local[s.base] = s
	b.mu.Unlock()
	return s.base, nil
}

// FreeLocal waits for the backend's stream and releases an allocation from
// AllocLocal. Where the wait fails (work may still use the memory) the
// allocation stays: FreeLocal may be called again, and Close releases it.
func (b *Backend) FreeLocal(ptr uint64) error {
	b.mu.Lock()
	s, ok := b.local[ptr]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda backend: FreeLocal(%#x): not from AllocLocal", ptr)
	}
	if err := b.stream.Wait(context.Background(), wait.DefaultTimeout); err != nil {
		return fmt.Errorf("cuda backend: FreeLocal(%#x): the allocation is kept (work may still use it): %w", ptr, err)
	}
	b.mu.Lock()
	if b.local[ptr] != s { // freed meanwhile (a concurrent FreeLocal, or Close)
		b.mu.Unlock()
		return fmt.Errorf("cuda backend: FreeLocal(%#x): not from AllocLocal (freed meanwhile)", ptr)
	}
	delete(b.local, ptr)
	b.mu.Unlock()
	if err := s.release(b.ctx); err != nil {
		return fmt.Errorf("cuda backend: FreeLocal(%#x): %w", ptr, err)
	}
	return nil
}
