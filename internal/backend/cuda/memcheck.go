package cuda

import (
	"fmt"

	"github.com/symmem/symmem/pool"
)

// CheckFits reports whether a segment of size bytes fits in the device's
// free memory now (pool.MemoryChecker), so an allocation that cannot fit
// fails at once with the size and the limit rather than inside the driver.
// Ranks sharing one GPU each check their own segment against what is free.
func (p *Provider) CheckFits(size int64) error {
	free, total, err := p.ctx.MemInfo()
	if err != nil {
		return nil // cannot tell: the allocation itself will say
	}
	if size > free {
		return fmt.Errorf("%w: %.1f MiB of device memory asked on GPU %d, %.1f MiB free of %.1f MiB",
			pool.ErrNoMemory, float64(size)/(1<<20), p.ctx.Dev, float64(free)/(1<<20), float64(total)/(1<<20))
	}
	return nil
}
