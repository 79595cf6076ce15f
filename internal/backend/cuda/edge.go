package cuda

import (
	"context"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	bnccl "github.com/symmem/symmem/internal/backend/nccl"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// executor is the edge of a call: what Run asks the driver while it builds
// (is the stream being captured?) and what it hands over once built (a
// stream program, in one cgo call; an NCCL call). Everything before it is
// data, so tests record what a call would issue without a GPU
// (golden_test.go).
type executor interface {
	capturing(ctx *cudadrv.Context, s uint64) (bool, error)
	program(p *cudadrv.Program) error
	// scratch allocates n bytes in stream order on stream s; release
	// frees them after the stream's earlier work.
	scratch(ctx *cudadrv.Context, s uint64, n int64) (uint64, error)
	release(ctx *cudadrv.Context, s, ptr uint64)
	nccl(ctx context.Context, c *bnccl.Comm, req backend.Request, win bool) (coll.Path, error)
}

// driver is the executor of a real group.
type driver struct{}

func (driver) capturing(ctx *cudadrv.Context, s uint64) (bool, error) {
	return cudadrv.StreamCapturing(ctx, s)
}

func (driver) program(p *cudadrv.Program) error { return p.Exec() }

func (driver) scratch(ctx *cudadrv.Context, s uint64, n int64) (uint64, error) {
	return cudadrv.AllocAsync(ctx, s, n)
}

// release ignores an error: the scratch then stays allocated in the
// driver's pool (the work that uses it was queued before).
func (driver) release(ctx *cudadrv.Context, s, ptr uint64) { _ = cudadrv.FreeAsync(ctx, s, ptr) }

func (driver) nccl(ctx context.Context, c *bnccl.Comm, req backend.Request, win bool) (coll.Path, error) {
	return c.RunDecided(ctx, req, win)
}
