package symmem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
)

// memory is the kind of memory buffers are: host memory (a backend without
// a device: the CPU backend) or a device's memory (backend.Device). Init
// chooses it once; nothing else in the user API asks which kind it holds.
type memory interface {
	// device is the CUDA ordinal of the memory's GPU, -1 for host memory.
	device() int
	// bytes is [ptr, +n) as a Go slice; nil where the memory is not
	// addressable from the host.
	bytes(ptr uint64, n int) []byte
	// write, read and copy move bytes in, out and locally (World.Write,
	// Read, Copy); n > 0.
	write(ctx context.Context, dst uint64, src []byte) error
	read(ctx context.Context, dst []byte, src uint64) error
	copy(dst, src uint64, n int64, stream uint64) error
	// allocLocal and freeLocal are ordinary memory outside the pool
	// (World.AllocLocal).
	allocLocal(bytes int64) (Buffer, error)
	freeLocal(ptr uint64) error
	// fence marks the work enqueued so far on stream, for the pool to wait
	// on before it hands freed bytes out again (nil: nothing to wait for).
	fence(stream uint64) (pool.Fence, error)
	// synchronize waits until the calls issued without WithStream are done.
	synchronize(ctx context.Context) error
	// checkOrdinary checks a call's ordinary (non-pool) spans before the
	// call reaches any peer.
	checkOrdinary(req backend.Request) error
	// group is bg as the user API runs it: host memory stages ordinary
	// memory through the pool (stager); a device's backend runs it itself.
	group(g *Group, bg backend.Group) backend.Group
}

// newMemory is the one choice of memory kind: host memory only where the
// backend declares no device. It returns the staging bytes to use: a device
// backend runs ordinary memory itself (the GPU backend on plain NCCL), so it
// needs no staging buffer.
func newMemory(dev backend.Device, p *pool.Pool, timeout time.Duration, staging int64) (memory, int64) {
	if dev != nil {
		return &deviceMemory{dev: dev, timeout: timeout}, -1
	}
	return &hostMemory{pool: p}, staging
}

// hostMemory is ordinary process memory: every operation is a plain copy
// that is done when it returns.
type hostMemory struct {
	pool  *pool.Pool
	mu    sync.Mutex
	local map[uint64][]byte // allocLocal's allocations (kept alive until freeLocal)
}

func (*hostMemory) device() int                       { return -1 }
func (*hostMemory) bytes(ptr uint64, n int) []byte    { return hostmem.Bytes(ptr, n) }
func (*hostMemory) fence(uint64) (pool.Fence, error)  { return nil, nil }
func (*hostMemory) synchronize(context.Context) error { return nil }
func (*hostMemory) checkOrdinary(backend.Request) error {
	return nil // any host address is this process's; the pool checks (World.freed) follow
}

func (*hostMemory) write(_ context.Context, dst uint64, src []byte) error {
	copy(hostmem.Bytes(dst, len(src)), src)
	return nil
}

func (*hostMemory) read(_ context.Context, dst []byte, src uint64) error {
	copy(dst, hostmem.Bytes(src, len(dst)))
	return nil
}

func (*hostMemory) copy(dst, src uint64, n int64, _ uint64) error {
	copy(hostmem.Bytes(dst, int(n)), hostmem.Bytes(src, int(n)))
	return nil
}

func (m *hostMemory) allocLocal(bytes int64) (Buffer, error) {
	// make panics (or the runtime dies) where the memory does not fit:
	// refuse what CheckFits refuses, as the pool does.
	if err := m.pool.CheckFits(bytes); err != nil {
		return Buffer{}, err
	}
	mem := make([]byte, bytes)
	b := Buffer{Span: HostSpan(mem), mem: m, local: &localBuf{mem: mem}}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.local == nil {
		m.local = map[uint64][]byte{}
	}
	m.local[b.Ptr] = mem
	return b, nil
}

func (m *hostMemory) freeLocal(ptr uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.local[ptr]; !ok {
		return fmt.Errorf("not allocated by AllocLocal: %w", ErrInvalid)
	}
	delete(m.local, ptr)
	return nil
}

func (m *hostMemory) group(g *Group, bg backend.Group) backend.Group {
	return &stager{Group: bg, g: g}
}

// deviceMemory is a GPU's memory, moved by the backend's Device; waits are
// bounded by Options.Timeout.
type deviceMemory struct {
	dev     backend.Device
	timeout time.Duration
}

func (m *deviceMemory) device() int                             { return m.dev.Ordinal() }
func (*deviceMemory) bytes(uint64, int) []byte                  { return nil }
func (m *deviceMemory) fence(stream uint64) (pool.Fence, error) { return m.dev.Fence(stream) }
func (m *deviceMemory) synchronize(ctx context.Context) error {
	return m.dev.Synchronize(ctx, m.timeout)
}
func (m *deviceMemory) freeLocal(ptr uint64) error                   { return m.dev.FreeLocal(ptr) }
func (*deviceMemory) group(_ *Group, bg backend.Group) backend.Group { return bg }

func (m *deviceMemory) write(ctx context.Context, dst uint64, src []byte) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return m.dev.Write(ctx, dst, src)
}

func (m *deviceMemory) read(ctx context.Context, dst []byte, src uint64) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return m.dev.Read(ctx, dst, src)
}

func (m *deviceMemory) copy(dst, src uint64, n int64, stream uint64) error {
	return m.dev.Copy(dst, src, n, stream)
}

func (m *deviceMemory) allocLocal(bytes int64) (Buffer, error) {
	p, err := m.dev.AllocLocal(bytes)
	if err != nil {
		return Buffer{}, err
	}
	return Buffer{Span: coll.Span{Ptr: p, Len: bytes}, mem: m, local: &localBuf{}}, nil
}

// checkOrdinary asks the device whether req's ordinary (non-pool) buffers
// are its memory (kernels and NCCL read them on this device); pool buffers
// are, and cost nothing here.
func (m *deviceMemory) checkOrdinary(req backend.Request) error {
	if !req.InSym.OK && req.In.Len > 0 {
		if err := m.dev.CheckLocal(req.In.Ptr); err != nil {
			return fmt.Errorf("in: %w", err)
		}
	}
	if !req.OutSym.OK && req.Out.Len > 0 && req.Out.Ptr != req.In.Ptr {
		if err := m.dev.CheckLocal(req.Out.Ptr); err != nil {
			return fmt.Errorf("out: %w", err)
		}
	}
	return nil
}

// What a harness (tests, benchmarks, examples, other language bindings)
// needs besides collectives: moving bytes in and out of buffers on either
// backend, and ordinary (non-symmetric) memory.

// Write copies src into dst[:len(src)]. When it returns the bytes are in
// the buffer and visible to every stream and every peer process: a
// collective issued afterwards (on any stream, by any rank told through the
// host) reads them. On the GPU backend it is a synchronous copy followed by
// a device synchronize (a pageable copy alone may return before its DMA has
// landed); it is meant for setup and tests, not the hot path. Input you
// write yourself on another stream must be ordered before the collective's
// stream (an event, or a stream synchronize) by you.
func (w *World) Write(ctx context.Context, dst coll.Span, src []byte) (err error) {
	defer markTimeout(&err)
	if err := w.alive(); err != nil {
		return err
	}
	if int64(len(src)) > dst.Len {
		return fmt.Errorf("symmem: Write of %d bytes into a %d-byte span: %w", len(src), dst.Len, ErrInvalid)
	}
	if len(src) == 0 {
		return nil
	}
	if err := w.mem.write(ctx, dst.Ptr, src); err != nil {
		return fmt.Errorf("symmem: Write(%#x): %w", dst.Ptr, err)
	}
	return nil
}

// Read copies src[:len(dst)] into dst after the calls issued without
// WithStream have completed (GPU backend; bounded by Options.Timeout).
func (w *World) Read(ctx context.Context, dst []byte, src coll.Span) (err error) {
	defer markTimeout(&err)
	if err := w.alive(); err != nil {
		return err
	}
	if int64(len(dst)) > src.Len {
		return fmt.Errorf("symmem: Read of %d bytes from a %d-byte span: %w", len(dst), src.Len, ErrInvalid)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := w.mem.read(ctx, dst, src.Ptr); err != nil {
		return fmt.Errorf("symmem: Read(%#x): %w", src.Ptr, err)
	}
	return nil
}

// Copy copies min(dst.Len, src.Len) bytes locally: at once on the CPU
// backend, enqueued on the stream (0: the backend's own) on a GPU.
func (w *World) Copy(dst, src coll.Span, stream uint64) error {
	if err := w.alive(); err != nil {
		return err
	}
	n := min(dst.Len, src.Len)
	if n <= 0 {
		return nil
	}
	if err := w.mem.copy(dst.Ptr, src.Ptr, n, stream); err != nil {
		return fmt.Errorf("symmem: Copy: %w", err)
	}
	return nil
}

// AllocLocal allocates ordinary memory of the backend's kind outside the
// pool — Go memory on the CPU backend, device memory on a GPU — for tests
// and benchmarks of the paths that take ordinary buffers. It is local (not
// collective) and not symmetric; free it with Free.
func (w *World) AllocLocal(bytes int64) (Buffer, error) {
	if err := w.alive(); err != nil {
		return Buffer{}, err
	}
	if bytes <= 0 {
		return Buffer{}, fmt.Errorf("symmem: AllocLocal(%d): want a positive size: %w", bytes, ErrInvalid)
	}
	b, err := w.mem.allocLocal(bytes)
	if err != nil {
		return Buffer{}, fmt.Errorf("symmem: AllocLocal(%d): %w", bytes, err)
	}
	return b, nil
}

func (w *World) freeLocal(b Buffer) error {
	if b.local.freed.Swap(true) {
		return fmt.Errorf("symmem: Free(%#x): %w (AllocLocal's buffer, freed before)", b.Ptr, ErrFreed)
	}
	if err := w.mem.freeLocal(b.Ptr); err != nil {
		b.local.freed.Store(false) // still allocated: a later Free may succeed
		return fmt.Errorf("symmem: Free(%#x): %w", b.Ptr, err)
	}
	return nil
}

// HostSpan describes host memory (an ordinary Go slice) as a coll.Span. The
// slice must stay alive (and unmodified by others) for the duration of the
// call it is passed to.
func HostSpan(b []byte) coll.Span { return coll.Span{Ptr: hostmem.Addr(b), Len: int64(len(b))} }

// Synchronize waits until every call this rank issued without WithStream has
// completed on the device (GPU backend; the CPU backend completes calls
// before returning, so it returns at once). It waits at most Options.Timeout.
func (w *World) Synchronize(ctx context.Context) (err error) {
	defer markTimeout(&err)
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.mem.synchronize(ctx); err != nil {
		return fmt.Errorf("symmem: Synchronize: %w", err)
	}
	return nil
}

// HostMemory reports whether the backend's buffers are host memory (the CPU
// backend: Buffer.Bytes works, Copy is a plain copy).
func (w *World) HostMemory() bool { return w.mem.device() < 0 }

// Device is the index of this rank's GPU (its CUDA ordinal), or -1 when
// buffers are host memory.
func (w *World) Device() int { return w.mem.device() }
