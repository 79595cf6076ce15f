package cuda

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/native/cudadrv"
	"github.com/symmem/symmem/pool"
)

// Provider supplies the pool's segments as VMM allocations on one device.
type Provider struct {
	ctx  *cudadrv.Context
	gran int64

	mu   sync.Mutex
	segs map[pool.SegmentID]*segment
}

// segment is one local VMM segment: mapped here, exportable as fd.
type segment struct {
	base uint64
	size int64
	fd   int // exported once at creation; closed on release
}

var _ pool.Provider = (*Provider)(nil)

func newProvider(ctx *cudadrv.Context, gran int64) *Provider {
	return &Provider{ctx: ctx, gran: gran, segs: map[pool.SegmentID]*segment{}}
}

// Granularity is the device's VMM granularity (2 MiB on H200).
func (p *Provider) Granularity() int64 { return p.gran }

// CreateSegment allocates size bytes on the device, maps them for the
// device and exports a file descriptor for the peers.
func (p *Provider) CreateSegment(id pool.SegmentID, size int64) (uint64, error) {
	if size <= 0 || size%p.gran != 0 {
		return 0, fmt.Errorf("cuda: segment %d: size %d is not a positive multiple of the granularity %d", id, size, p.gran)
	}
	p.mu.Lock()
	_, dup := p.segs[id]
	p.mu.Unlock()
	if dup {
		return 0, fmt.Errorf("cuda: segment %d already exists", id)
	}
	s, err := createLocal(p.ctx, size, p.gran)
	if err != nil {
		return 0, fmt.Errorf("cuda: segment %d: %w", id, err)
	}
	p.mu.Lock()
	p.segs[id] = s
	p.mu.Unlock()
	return s.base, nil
}

// createLocal allocates, maps and exports one VMM segment. The allocation
// handle is released at once: the mapping and the fd keep the memory.
func createLocal(ctx *cudadrv.Context, size, gran int64) (*segment, error) {
	a, err := cudadrv.Create(ctx, size)
	if err != nil {
		return nil, err
	}
	base, err := a.Map(ctx, gran, []int{ctx.Dev})
	if err != nil {
		return nil, errors.Join(err, a.Release())
	}
	fd, err := a.ExportFD()
	if err != nil {
		return nil, errors.Join(err, cudadrv.Unmap(ctx, base, size), a.Release())
	}
	if err := a.Release(); err != nil {
		// The handle's release failed: trying again would not do better.
		// The mapping and the fd, which hold the memory too, go.
		return nil, errors.Join(err, cudadrv.Unmap(ctx, base, size), unix.Close(fd))
	}
	return &segment{base: base, size: size, fd: fd}, nil
}

func (s *segment) release(ctx *cudadrv.Context) error {
	err := cudadrv.Unmap(ctx, s.base, s.size)
	if s.fd >= 0 {
		err = errors.Join(err, unix.Close(s.fd))
		s.fd = -1
	}
	return err
}

// ReleaseSegment unmaps and frees a segment and closes its fd.
func (p *Provider) ReleaseSegment(id pool.SegmentID) error {
	p.mu.Lock()
	s, ok := p.segs[id]
	delete(p.segs, id)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: release of segment %d, which this provider did not create", id)
	}
	if err := s.release(p.ctx); err != nil {
		return fmt.Errorf("cuda: segment %d: %w", id, err)
	}
	return nil
}

func (p *Provider) fd(id pool.SegmentID) (int, int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.segs[id]
	if !ok {
		return -1, 0, fmt.Errorf("cuda: segment %d is not one of this provider's", id)
	}
	return s.fd, s.size, nil
}

// Len is the number of live segments.
func (p *Provider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.segs)
}

func (p *Provider) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for id, s := range p.segs {
		if err := s.release(p.ctx); err != nil {
			errs = append(errs, fmt.Errorf("segment %d: %w", id, err))
		}
		delete(p.segs, id)
	}
	return errors.Join(errs...)
}

// importPeer imports a peer's segment from fd and maps it for this device.
func importPeer(ctx *cudadrv.Context, fd int, size, gran int64) (uint64, error) {
	a, err := cudadrv.Import(fd, size)
	if err != nil {
		return 0, err
	}
	base, err := a.Map(ctx, gran, []int{ctx.Dev})
	rerr := a.Release()
	if err != nil {
		return 0, errors.Join(err, rerr)
	}
	if rerr != nil {
		return 0, errors.Join(rerr, cudadrv.Unmap(ctx, base, size))
	}
	return base, nil
}
