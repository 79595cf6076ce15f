package cuda

import (
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// path is one of symmem's own ways to run a collective on the GPU (kernel,
// two-shot, lc, ce; NCCL's run through nccl.go). Run finds the chosen
// algorithm's path in the group's table (pathFor) and, holding runMu with
// the call published at the gate, asks it to issue the call.
type path interface {
	// whyNot says why the path cannot run req (nil if it can); a forced
	// call it cannot run is refused with it (backend.ErrRefused).
	whyNot(req backend.Request) error
	// issue builds c's whole stream program and executes it (Group.issue).
	issue(c *call) error
}

// paths are a group's paths, each holding what only it uses.
type paths struct {
	kernel  kernelPath
	twoShot twoShotPath
	lc      lcPath
	ce      cePath
}

func newPaths(g *Group) paths {
	return paths{kernel: kernelPath{g: g}, twoShot: twoShotPath{g: g}, lc: lcPath{g: g}, ce: cePath{g: g}}
}

// pathFor is the path of symmem's own that runs algorithm a (nil: NCCL's,
// or none).
func (g *Group) pathFor(a coll.Algo) path {
	switch a {
	case coll.AlgoKernel:
		return &g.paths.kernel
	case coll.AlgoTwoShot:
		return &g.paths.twoShot
	case coll.AlgoLowContention:
		return &g.paths.lc
	case coll.AlgoCE:
		return &g.paths.ce
	}
	return nil
}

// newProgram is the group's program, emptied, for the call being built.
func (g *Group) newProgram() *cudadrv.Program {
	p := g.prog
	p.Reset()
	p.SetContext(g.b.ctx)
	return p
}

// issue tracks and executes p, the whole of call c (or what goes before or
// after an NCCL call), on c's stream. A failure leaves the peers waiting
// for signals this rank will not send: the group cannot go on.
func (g *Group) issue(p *cudadrv.Program, c *call, what string) error {
	if err := g.track(p, c.req.Stream); err != nil {
		return err
	}
	if err := g.x.program(p); err != nil {
		if ferr := g.takeFault(); ferr != nil { // the handshake trapped: that is why
			return ferr
		}
		g.broken = fmt.Errorf("%v %s failed: %w", c.req.Kind, what, err)
		return fmt.Errorf("%w: %w", ErrBroken, g.broken)
	}
	return nil
}
