package symmem

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/native/hostmem"
)

// What a harness (tests, benchmarks, examples, other language bindings)
// needs besides collectives: moving bytes in and out of buffers on either
// backend, ordinary (non-symmetric) memory, and host-side agreement.

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
	if w.dev == nil {
		copy(hostmem.Bytes(dst.Ptr, len(src)), src)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	if err := w.dev.Write(ctx, dst.Ptr, src); err != nil {
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
	if w.dev == nil {
		copy(dst, hostmem.Bytes(src.Ptr, len(dst)))
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	if err := w.dev.Read(ctx, dst, src.Ptr); err != nil {
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
	if w.dev == nil {
		copy(hostmem.Bytes(dst.Ptr, int(n)), hostmem.Bytes(src.Ptr, int(n)))
		return nil
	}
	if err := w.dev.Copy(dst.Ptr, src.Ptr, n, stream); err != nil {
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
	if w.dev == nil {
		// make panics (or the runtime dies) where the memory does not fit:
		// refuse what CheckFits refuses, as the pool does.
		if err := w.pool.CheckFits(bytes); err != nil {
			return Buffer{}, fmt.Errorf("symmem: AllocLocal(%d): %w", bytes, err)
		}
		mem := make([]byte, bytes)
		b := Buffer{Span: HostSpan(mem), host: true, local: &localBuf{mem: mem}}
		w.mu.Lock()
		if w.local == nil {
			w.local = map[uint64][]byte{}
		}
		w.local[b.Ptr] = mem
		w.mu.Unlock()
		return b, nil
	}
	p, err := w.dev.AllocLocal(bytes)
	if err != nil {
		return Buffer{}, fmt.Errorf("symmem: AllocLocal(%d): %w", bytes, err)
	}
	return Buffer{Span: coll.Span{Ptr: p, Len: bytes}, local: &localBuf{}}, nil
}

// localBuf is an AllocLocal allocation as its Buffers share it: its Go
// memory (CPU backend), referenced so that a Buffer's Bytes never outlive
// it, and whether Free returned it.
type localBuf struct {
	mem   []byte
	freed atomic.Bool
}

func (w *World) freeLocal(b Buffer) error {
	if b.local.freed.Swap(true) {
		return fmt.Errorf("symmem: Free(%#x): %w (AllocLocal's buffer, freed before)", b.Ptr, ErrFreed)
	}
	if w.dev != nil {
		if err := w.dev.FreeLocal(b.Ptr); err != nil {
			b.local.freed.Store(false)
			return fmt.Errorf("symmem: Free(%#x): %w", b.Ptr, err)
		}
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.local[b.Ptr]; !ok {
		return fmt.Errorf("symmem: Free(%#x): not allocated by AllocLocal: %w", b.Ptr, ErrInvalid)
	}
	delete(w.local, b.Ptr)
	return nil
}

// Barrier returns once every member of the group has entered it. It is a
// host-side rendezvous through the store (milliseconds): it does not wait
// for device work (Synchronize first).
func (g *Group) Barrier(ctx context.Context) error {
	_, err := g.AllGatherHost(ctx, nil)
	return err
}

// AllGatherHost returns every member's mine, indexed by group rank,
// exchanged through the rendezvous store on the host: for seeds, checks and
// agreement in harnesses, not for data (each call costs store round trips).
// Collective over the group's members.
func (g *Group) AllGatherHost(ctx context.Context, mine []byte) (_ [][]byte, err error) {
	defer markTimeout(&err)
	if err := g.w.alive(); err != nil {
		return nil, err
	}
	if !g.IsMember() {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: rank %d is not a member: %w", g.name, g.w.Rank(), ErrNotMember)
	}
	if g.closed.Load() {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: %w", g.name, ErrGroupClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, g.w.opts.Timeout)
	defer cancel()
	all, err := g.bg.AllGather(ctx, mine)
	if err != nil {
		return nil, fmt.Errorf("symmem: AllGatherHost on group %q: %w", g.name, err)
	}
	return all, nil
}

// HostMemory reports whether the backend's buffers are host memory (the CPU
// backend: Buffer.Bytes works, Copy is a plain copy).
func (w *World) HostMemory() bool { return w.dev == nil }

// Device is the index of this rank's GPU (its CUDA ordinal), or -1 when
// buffers are host memory.
func (w *World) Device() int {
	if w.dev == nil {
		return -1
	}
	return w.dev.Ordinal()
}

// Supports reports whether WithAlgo(a) is accepted for k on this world's
// backend (auto always is); others fail with ErrNotSupported.
func (w *World) Supports(k coll.Kind, a coll.Algo) bool { return w.caps.Supports(k, a) }

// Algos lists the algorithms WithAlgo may force for k besides auto.
func (w *World) Algos(k coll.Kind) []coll.Algo { return append([]coll.Algo(nil), w.caps.Algos[k]...) }
