package symmem

import (
	"fmt"
	"sync/atomic"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/pool"
)

// Buffer is memory from the symmetric pool (or, from AllocLocal, ordinary
// memory outside it).
type Buffer struct {
	coll.Span
	mem   memory     // its kind (nil for the zero Buffer)
	local *localBuf  // from AllocLocal (nil otherwise)
	pool  *pool.Pool // the pool it came from (nil for the zero Buffer and AllocLocal)
	gen   uint64     // its allocation's generation in that pool
}

// Bytes returns the buffer as a Go slice when it is host memory (CPU
// backend); nil otherwise, and nil once the buffer was freed (World.Free):
// its memory may belong to a later allocation then. A slice obtained before
// Free must not be used after it.
func (b Buffer) Bytes() []byte {
	if b.mem == nil || b.Len == 0 || !b.live() || b.local != nil && b.local.freed.Load() {
		return nil
	}
	return b.mem.bytes(b.Ptr, int(b.Len))
}

// live reports whether b's allocation is still allocated (not freed, and not
// replaced by a later allocation at the same address).
func (b Buffer) live() bool { return b.pool == nil || b.pool.Live(b.Ptr, b.gen) }

// localBuf is an AllocLocal allocation as its Buffers share it: its Go
// memory (CPU backend), referenced so that a Buffer's Bytes never outlive
// it, and whether Free returned it.
type localBuf struct {
	mem   []byte
	freed atomic.Bool
}

// Alloc allocates symmetric memory outside any scope. Like Scope.Alloc it
// must be called with the same size on every rank; the block becomes usable
// by a group's direct path once that group has registered its segment (the
// next Scope.End of the group).
func (w *World) Alloc(bytes int64) (Buffer, error) {
	if err := w.alive(); err != nil {
		return Buffer{}, err
	}
	blk, err := w.pool.Alloc(bytes, Align)
	if err != nil {
		return Buffer{}, fmt.Errorf("symmem: Alloc(%d): %w", bytes, err)
	}
	return Buffer{Span: coll.Span{Ptr: blk.Addr, Len: bytes}, mem: w.mem, pool: w.pool, gen: blk.Gen}, nil
}

// Free returns a buffer to the pool. Call it on every rank, in the same
// order, to keep the pools symmetric. On the GPU backend the buffer may still
// be in use by calls made without WithStream: it is fenced on the backend's
// stream, and whoever is handed its bytes next waits until that work is
// done. After calls on your own stream, use FreeOn.
func (w *World) Free(b Buffer) error { return w.FreeOn(b, 0) }

// FreeOn is Free for a buffer last used on the given CUDA stream (0: the
// backend's own). The CPU backend ignores the stream.
func (w *World) FreeOn(b Buffer, stream uint64) error {
	if err := w.alive(); err != nil {
		return err
	}
	if b.local != nil {
		return w.freeLocal(b)
	}
	if b.pool != nil && !b.live() {
		return fmt.Errorf("symmem: Free(%#x): %w (freed before; the pool may have handed its memory to a later allocation)", b.Ptr, ErrFreed)
	}
	f, err := w.mem.fence(stream)
	if err != nil {
		return fmt.Errorf("symmem: Free(%#x): %w", b.Ptr, err)
	}
	if err := w.pool.Free(b.Ptr, f); err != nil {
		return fmt.Errorf("symmem: Free(%#x): %w", b.Ptr, err)
	}
	return nil
}

// CheckFits reports whether bytes more of symmetric memory would fit now on
// this rank (with the CPU backend: in host memory, counting every local
// rank's copy; with the GPU backend: in the device's free memory): nil, or
// an error wrapping ErrNoMemory that names the size and the limit. Alloc
// checks every new segment itself; CheckFits lets a program check a whole
// plan up front (symmem bench checks its sweep).
func (w *World) CheckFits(bytes int64) error {
	if err := w.alive(); err != nil {
		return err
	}
	if err := w.pool.CheckFits(bytes); err != nil {
		return fmt.Errorf("symmem: %s more symmetric memory does not fit: %w", coll.FormatSize(bytes), err)
	}
	return nil
}

// IsSymmetric reports whether s lies inside one live pool block whose
// segment is registered with the group, so a collective on it takes the
// direct path instead of staging. False on a non-member or a closed group.
func (g *Group) IsSymmetric(s coll.Span) bool {
	if !g.IsMember() || g.closed.Load() {
		return false
	}
	return g.sym(s).OK
}

// sym locates s in the pool for this group's direct path.
func (g *Group) sym(s coll.Span) backend.Sym {
	seg, off, ok := g.w.pool.Symmetric(s.Ptr, s.Len, g.gid)
	return backend.Sym{OK: ok, Seg: seg, Off: off}
}

// freed returns an error wrapping ErrFreed when a span a collective was
// given lies in pool memory that is not allocated: a buffer used after
// World.Free. (A span into memory that a later allocation took over is that
// allocation's and cannot be told apart; Buffer.Bytes and World.Free of the
// old Buffer do refuse it.) A span that starts in a pool segment and runs
// past its end (longer than its buffer) is ErrInvalid, also where it
// crosses free space on the way: staging would copy from unmapped memory,
// and "freed" would send the user looking for a Free they never made.
// Called only for calls that would not take the
// symmetric path, so the direct path pays nothing.
func (w *World) freed(spans ...coll.Span) error {
	for _, s := range spans {
		if s.Len <= 0 {
			continue
		}
		loc, inPool := w.pool.Lookup(s.Ptr)
		// Past the segment's end first: a span starting in a live block is
		// too long, whatever free space it crosses on the way.
		if inPool && loc.Live && s.Len > loc.Segment.Size-loc.Off {
			return fmt.Errorf("span [%#x, +%d) runs past the end of pool segment %d (%d bytes left there; its block has %d): the span is longer than its buffer: %w",
				s.Ptr, s.Len, loc.Segment.ID, loc.Segment.Size-loc.Off, loc.Block.Addr+uint64(loc.Block.Size)-s.Ptr, ErrInvalid)
		}
		if w.pool.Freed(s.Ptr, s.Len) {
			if inPool && loc.Live {
				return fmt.Errorf("span [%#x, +%d) runs past the end of its block (%d bytes left there) into pool memory that is not allocated (freed by World.Free, or the span is longer than its buffer): %w",
					s.Ptr, s.Len, loc.Block.Addr+uint64(loc.Block.Size)-s.Ptr, ErrFreed)
			}
			return fmt.Errorf("span [%#x, +%d) lies in pool memory that is not allocated (used after World.Free?): %w", s.Ptr, s.Len, ErrFreed)
		}
		if inPool && s.Len > loc.Segment.Size-loc.Off {
			return fmt.Errorf("span [%#x, +%d) runs past the end of pool segment %d (%d bytes left there: longer than its buffer): %w",
				s.Ptr, s.Len, loc.Segment.ID, loc.Segment.Size-loc.Off, ErrInvalid)
		}
	}
	return nil
}
