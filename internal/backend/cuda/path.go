package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/cudadrv"
)

// errNotSymmetric is wrapped when a forced symmetric path gets buffers that
// are not pool blocks registered with the group.
var errNotSymmetric = errors.New("buffer is not symmetric (not a registered pool block)")

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

// pathInfo is one row of pathTable: what the backend knows of a GPU path
// besides its own file.
type pathInfo struct {
	algo coll.Algo
	// ops are the collectives a call may force onto the path
	// (Capabilities); choose refuses the others.
	ops []coll.Kind
	// serve and opsHint word the refusal of another op (kindWhy): "<serve>
	// <ops>, not <op><opsHint>".
	serve, opsHint string
	// gated: its calls wait for the call gate's approval (gate.go).
	gated bool
	// new makes the group's instance of the path in p (choose's answer).
	new func(g *core, p *pathSet, row *pathInfo) path
	// kernArgs allocates its parameter blocks in a group that has
	// symmem's kernels (setup); nil: it has none.
	kernArgs func(p *pathSet)
	// serves is auto's condition pathServes on a step that hands the call to
	// this path: the path would run it (nil: no step does).
	serves func(p *pathSet, req backend.Request) bool
	// fallback is auto's order where the auto table names this path (nil:
	// auto does not start from it; autostep.go).
	fallback []coll.Algo
	// turn is its steps in auto's orders (autostep.go).
	turn []autoStep

	requested string     // the reason of a forced call, formatted once
	kinds     uint64     // ops as a set, bit k for coll.Kind k
	order     []autoStep // the steps of fallback's turns, joined (auto)
}

// does reports whether the path serves op k.
func (r *pathInfo) does(k coll.Kind) bool { return k >= 0 && k < 64 && r.kinds&(1<<k) != 0 }

// kindWhy is the refusal of op k, which the path does not serve.
func (r *pathInfo) kindWhy(k coll.Kind) error {
	names := make([]string, len(r.ops))
	for i, o := range r.ops {
		names[i] = o.String()
	}
	list := names[len(names)-1]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " and " + list
	}
	return fmt.Errorf("%s %s, not %v%s: %w", r.serve, list, k, r.opsHint, errs.NotSupported)
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

// refused is the error of a call forced onto one of symmem's paths, which
// says why it cannot run it (whyNot; nil: it can).
func refused(c call, whyNot error) error {
	if whyNot != nil {
		return fmt.Errorf("%s requested but %w: %w", c.req.Algo, whyNot, errs.Refused)
	}
	return nil
}
