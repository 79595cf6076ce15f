package symmem

import (
	"fmt"

	"github.com/symmem/symmem/coll"
)

// live reports whether b's allocation is still allocated (not freed, and not
// replaced by a later allocation at the same address).
func (b Buffer) live() bool { return b.pool == nil || b.pool.Live(b.Ptr, b.gen) }

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
