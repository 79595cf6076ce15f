package symmem

import (
	"fmt"

	"github.com/symmem/symmem/coll"
)

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
