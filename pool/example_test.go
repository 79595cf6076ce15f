package pool_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/symmem/symmem/internal/native/hostmem"
	"github.com/symmem/symmem/pool"
)

// hostProvider backs segments with real anonymous memory (mmap).
type hostProvider struct {
	mu   sync.Mutex
	mems map[pool.SegmentID][]byte
}

func (h *hostProvider) Granularity() int64 { return int64(syscall.Getpagesize()) }

func (h *hostProvider) CreateSegment(id pool.SegmentID, size int64) (uint64, error) {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mems == nil {
		h.mems = map[pool.SegmentID][]byte{}
	}
	h.mems[id] = b
	return hostmem.Addr(b), nil
}

func (h *hostProvider) ReleaseSegment(id pool.SegmentID) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.mems[id]
	delete(h.mems, id)
	return syscall.Munmap(b)
}

// soloGroup is a complete group of one rank: its all-gather is the rank's
// own bytes, and registration is a record (a real backend registers with its
// communicator here).
type soloGroup struct{ name string }

func (g soloGroup) Rank() int    { return 0 }
func (g soloGroup) Size() int    { return 1 }
func (g soloGroup) Name() string { return g.name }

// Agreer is nil: the group compares through AllGather (a backend whose
// ranks share memory compares in-band here).
func (g soloGroup) Agreer() pool.Agreer { return nil }
func (g soloGroup) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	return [][]byte{mine}, nil
}
func (g soloGroup) Register(ctx context.Context, s pool.Segment) error {
	fmt.Printf("register segment %d (%d KiB) with %s\n", s.ID, s.Size>>10, g.name)
	return nil
}
func (g soloGroup) Deregister(ctx context.Context, s pool.Segment) error {
	fmt.Printf("deregister segment %d from %s\n", s.ID, g.name)
	return nil
}

// Typical use: one pool per process, a group, a scope around the
// allocations a collective will use, then the symmetric check a collective
// makes, then cleanup.
func Example() {
	ctx := context.Background()
	p, err := pool.New(&hostProvider{}, pool.Options{MinSegment: 1 << 20})
	if err != nil {
		panic(err)
	}
	world, _ := p.AddGroup(soloGroup{"world"}, 0)

	scope, _ := p.OpenScope(world)
	buf, _ := p.Alloc(64<<10, 4096)
	if err := scope.End(ctx); err != nil { // registers segment 1 with world
		panic(err)
	}
	copy(hostmem.Bytes(buf.Addr, int(buf.Size)), "hello") // real memory
	seg, off, ok := p.Symmetric(buf.Addr+4096, 1024, world)
	fmt.Println("symmetric:", ok, "segment", seg, "offset", off)

	p.Free(buf.Addr, nil)
	if err := p.Trim(ctx); err != nil { // deregisters and releases segment 1
		panic(err)
	}
	fmt.Println("segments left:", len(p.Segments()))
	p.Close(ctx)
	// Output:
	// register segment 1 (1024 KiB) with world
	// symmetric: true segment 1 offset 4096
	// deregister segment 1 from world
	// segments left: 0
}

// Errors carry sentinels for the conditions callers test for.
func ExamplePool_Alloc_errors() {
	p, _ := pool.New(&hostProvider{}, pool.Options{MinSegment: 1 << 20, Cap: 1 << 20})
	defer p.Close(context.Background())
	_, err := p.Alloc(100, 3)
	fmt.Println(err)
	_, err = p.Alloc(2<<20, 1)
	fmt.Println(err)
	b, _ := p.Alloc(100, 1)
	p.Free(b.Addr, nil)
	fmt.Println(p.Free(b.Addr, nil) != nil)
	// Output:
	// pool: alignment must be a power of two: Alloc(100, 3): use a power of two (1 for no alignment)
	// pool: allocation would exceed the pool's cap: Alloc(2097152) needs a new 2097152-byte segment; 0 of the cap of 1048576 bytes are reserved (free or Trim blocks, or raise Options.Cap)
	// true
}
