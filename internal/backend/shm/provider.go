package shm

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
)

// segment is one memfd-backed mapping owned by this process.
type segment struct {
	fd   int
	mem  []byte
	base uint64
}

// Provider supplies memfd segments to this process's pool. It is safe for
// concurrent use.
type Provider struct {
	local int // ranks on this host, each creating its own copy (memcheck.go)

	mu     sync.Mutex
	segs   map[pool.SegmentID]*segment
	closed bool
}

// NewProvider returns a provider with no segments.
func NewProvider() *Provider { return &Provider{segs: make(map[pool.SegmentID]*segment)} }

// Granularity is the page size: every segment is a whole number of pages.
func (p *Provider) Granularity() int64 { return int64(os.Getpagesize()) }

// CreateSegment creates a memfd of size bytes, maps it shared and returns
// its address in this process.
func (p *Provider) CreateSegment(id pool.SegmentID, size int64) (uint64, error) {
	if size <= 0 || size%p.Granularity() != 0 {
		return 0, fmt.Errorf("shm: segment %d: size %d is not a positive multiple of the page size %d", id, size, p.Granularity())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("shm: segment %d: provider is closed", id)
	}
	if _, dup := p.segs[id]; dup {
		return 0, fmt.Errorf("shm: segment %d already exists", id)
	}
	fd, mem, err := newShared(fmt.Sprintf("symmem-seg-%d", id), size)
	if err != nil {
		return 0, fmt.Errorf("shm: segment %d (%d bytes): %w", id, size, err)
	}
	s := &segment{fd: fd, mem: mem, base: hostmem.Addr(mem)}
	p.segs[id] = s
	return s.base, nil
}

// ReleaseSegment unmaps the segment and closes its memfd. Peers that still
// map it keep their mapping valid until they unmap it (the kernel frees the
// memory with the last mapping).
func (p *Provider) ReleaseSegment(id pool.SegmentID) error {
	p.mu.Lock()
	s, ok := p.segs[id]
	delete(p.segs, id)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("shm: release of unknown segment %d", id)
	}
	return s.release()
}

// fd returns the memfd of segment id (for passing to peers).
func (p *Provider) fd(id pool.SegmentID) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.segs[id]
	if !ok {
		return -1, fmt.Errorf("shm: segment %d is not a segment of this process's provider", id)
	}
	return s.fd, nil
}

// Len is the number of live segments.
func (p *Provider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.segs)
}

// Close releases every segment still alive. Later CreateSegment calls fail.
func (p *Provider) Close() error {
	p.mu.Lock()
	segs := p.segs
	p.segs = make(map[pool.SegmentID]*segment)
	p.closed = true
	p.mu.Unlock()
	var first error
	for _, s := range segs {
		if err := s.release(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *segment) release() error {
	err := unix.Munmap(s.mem)
	if cerr := unix.Close(s.fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("shm: releasing segment: %w", err)
	}
	return nil
}

// newShared creates a memfd of size bytes and maps it read-write shared.
func newShared(name string, size int64) (int, []byte, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("ftruncate to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("mmap of %d bytes: %w (check `ulimit -v` and available memory)", size, err)
	}
	return fd, mem, nil
}

// mapPeer maps a peer's memfd of the expected size. It checks the file's
// size first so a mismatch is an error rather than a SIGBUS later.
func mapPeer(fd int, size int64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat of peer memfd: %w", err)
	}
	if st.Size != size {
		return nil, fmt.Errorf("peer memfd holds %d bytes, want %d (ranks disagree on the segment)", st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap of peer memfd (%d bytes): %w", size, err)
	}
	return mem, nil
}
