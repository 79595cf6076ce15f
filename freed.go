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
// past its end (longer than its buffer) is ErrInvalid: staging would copy
// from unmapped memory. Called only for calls that would not take the
// symmetric path, so the direct path pays nothing.
func (w *World) freed(spans ...coll.Span) error {
	for _, s := range spans {
		if s.Len > 0 && w.pool.Freed(s.Ptr, s.Len) {
			return fmt.Errorf("span [%#x, +%d) lies in pool memory that is not allocated (used after World.Free?): %w", s.Ptr, s.Len, ErrFreed)
		}
		if loc, ok := w.pool.Lookup(s.Ptr); ok && s.Len > loc.Segment.Size-loc.Off {
			return fmt.Errorf("span [%#x, +%d) runs past the end of pool segment %d (%d bytes left there: longer than its buffer): %w",
				s.Ptr, s.Len, loc.Segment.ID, loc.Segment.Size-loc.Off, ErrInvalid)
		}
	}
	return nil
}
