package pool

import (
	"errors"
	"fmt"
)

// ErrNoMemory is wrapped when a segment would not fit in the memory left
// (host memory for the CPU backend, free device memory for the GPU).
var ErrNoMemory = errors.New("pool: not enough memory")

// MemoryChecker is implemented by providers that can tell, before creating
// a segment, whether it fits in the memory left now. CheckFits returns nil
// or an error wrapping ErrNoMemory that names the size and the limit.
type MemoryChecker interface {
	CheckFits(size int64) error
}

// CheckFits reports whether segments of size bytes in all (rounded up to
// the provider's granularity) would fit in the memory left now: nil, or an
// error wrapping ErrNoMemory. Providers that cannot tell always fit. The
// pool calls it before creating every segment, so an allocation that cannot
// fit fails at once instead of being ended later by the kernel's OOM killer;
// callers that will allocate much (a benchmark sweep) can check up front.
func (p *Pool) CheckFits(size int64) error {
	if err := checkSize("CheckFits", size); err != nil {
		return err
	}
	mc, ok := p.prov.(MemoryChecker)
	if !ok {
		return nil
	}
	return mc.CheckFits(roundUp(size, p.segGran))
}

// fitsLocked is CheckFits for a segment the pool is about to create.
func (p *Pool) fitsLocked(what string, size int64) error {
	if err := p.CheckFits(size); err != nil {
		return fmt.Errorf("%s needs a new %s segment: %w", what, sizeStr(size), err)
	}
	return nil
}
