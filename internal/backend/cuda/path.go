package cuda

import (
	"context"
	"fmt"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// path is one way to run a collective on the GPU: symmem's (kernel,
// two-shot, lc, ll, ce), NCCL's (nccl, nccl-window) and, across hosts,
// both (hier); pathTable lists them. Run gets the chosen one from choose
// and, holding runMu, asks it to prepare the call, then, with the call published at the gate, to
// issue it, then to finish it with runMu released.
type path interface {
	// refuse is why a call forced onto the path cannot run (nil if it
	// can): the error choose returns.
	refuse(c call) error
	// prepare does the host work of c that can fail on this rank alone
	// (lc: its staging), before c is published: once it is, the peers
	// may be approved and wait for this rank on the GPU, so a failure
	// after breaks the group. The caller holds runMu.
	prepare(c call) error
	// issue queues what goes on c's stream now: symmem's paths their
	// whole stream program, NCCL's what goes before NCCL's call. The
	// caller holds runMu and has published c at the gate.
	issue(c call) error
	// finish runs what follows with runMu released: NCCL's call (its
	// communicator serialises it) and checked mode's join after it. ran
	// is the path as NCCL reports it (nccl-window where a plain nccl call
	// ran on the windowed communicator); "" for symmem's paths.
	finish(ctx context.Context, c call) (ran coll.Algo, err error)
}

// The call goes to a path by value: through an interface a pointer to it
// would escape, and Run would allocate it on every call.

// whole is embedded by symmem's paths: issue queues the whole call as one
// stream program, so nothing is left to finish.
type whole struct{}

func (whole) prepare(call) error                              { return nil }
func (whole) finish(context.Context, call) (coll.Algo, error) { return "", nil }

// releaser is a path that holds what the group's Close frees (parameter
// blocks, staging).
type releaser interface{ release() error }

// freeArgs frees the parameter blocks allocated (kernArgs).
func freeArgs(as ...*cudadrv.Args) {
	for _, a := range as {
		if a != nil {
			a.Free()
		}
	}
}

// refusal says why a path cannot run a call, as a code: auto asks every
// path it passes on every call, so the check formats nothing; a path's
// whyNot turns the code into the error a forced call gets.
type refusal uint8

const (
	served       refusal = iota
	refKind              // the path does not serve the op
	refNoKernels         // the group has no kernels (g.caps.kernWhy)
	refInNotSym          // the input is not a registered pool block
	refOutNotSym         // the output is not
	refOp                // the kernels do not reduce this op and type
	refHeld              // an in-place all-reduce larger than the kernel holds
	refElemAlign         // a buffer is not element-aligned

	// refOwn is the first of a path's own codes, declared in its file
	// (they may repeat across paths: a path's whyNot reads its own check's).
	refOwn
)

// kernelsWhyNot is the error of the refusals every kernel path shares.
func kernelsWhyNot(kernWhy string, req backend.Request, r refusal) error {
	switch r {
	case refNoKernels:
		return fmt.Errorf("the kernels are unavailable (%s): %w", kernWhy, errs.NotSupported)
	case refOp:
		return fmt.Errorf("%v of %v: %w (use nccl)", req.Op, req.DType, errKernelOp)
	case refHeld:
		return fmt.Errorf("in-place all-reduce of %d bytes: %w (use two-shot, lc or nccl)", req.Count*int64(req.DType.Size()), errKernelOp)
	case refElemAlign:
		return fmt.Errorf("input %#x, output %#x, %v elements: %w (use nccl)", req.In.Ptr, req.Out.Ptr, req.DType, errKernelAlign)
	}
	panic(fmt.Sprintf("cuda: refusal %d has no shared wording", r))
}

// refused is the error of a call forced onto one of symmem's paths, which
// says why it cannot run it (whyNot; nil: it can).
func refused(c call, whyNot error) error {
	if whyNot != nil {
		return fmt.Errorf("%s requested but %w: %w", c.req.Algo, whyNot, errs.Refused)
	}
	return nil
}
