package symmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/pool"
)

// Every sentinel the user API documents, provoked through the user API on
// real ranks, on each backend: errors.Is must hold whichever layer found
// the condition (the pool at Scope.End, the GPU backend refusing a forced
// algorithm, ...). ErrBroken needs a peer to die mid-collective; the fault
// tests (faults_test.go, internal/backend/shm) provoke it.

func init() {
	roles["promises-cpu"] = func(ctx context.Context) error { return rolePromises(ctx, "cpu") }
	roles["promises-cuda"] = func(ctx context.Context) error { return rolePromises(ctx, "cuda") }
}

func TestErrorPromisesCPU(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "promises-cpu"))
}

func TestErrorPromisesGPU(t *testing.T) {
	n, env := gpuRanks(t)
	expectOK(t, spawn(t, n, "promises-cuda", env...))
}

// The sentinels are one value at every layer: internal/errs's, aliased by
// the public packages.
func TestSentinelsAliased(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want error
	}{
		{"pool.ErrMismatch", pool.ErrMismatch, ErrMismatch},
		{"pool.ErrClosed", pool.ErrClosed, ErrClosed},
		{"pool.ErrGroupClosed", pool.ErrGroupClosed, ErrGroupClosed},
		{"errs.NotSupported (the internal packages wrap it)", errs.NotSupported, ErrNotSupported},
	} {
		if !errors.Is(fmt.Errorf("wrapped: %w", c.got), c.want) {
			t.Errorf("%s does not match the user API's sentinel", c.name)
		}
	}
}

func rolePromises(ctx context.Context, backend string) error {
	o := testOptions()
	o.Backend = backend
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	me := w.Rank()
	sc, err := g.OpenScope()
	if err != nil {
		return err
	}
	in, err := sc.Alloc(4096)
	if err != nil {
		return err
	}
	out, err := sc.Alloc(int64(g.Size()) * 4096)
	if err != nil {
		return err
	}
	if err := sc.End(ctx); err != nil {
		return err
	}
	type promise struct {
		name string
		only string // "" on both backends
		want error
		call func() error
	}
	cases := []promise{
		{"Init with an unknown backend", "", ErrInvalid, func() error {
			_, err := Init(ctx, Options{Backend: "tpu"})
			return err
		}},
		{"Init with Options.GPU.LowContentionCTAs out of range", "", ErrInvalid, func() error {
			_, err := Init(ctx, Options{GPU: GPUOptions{LowContentionCTAs: 65}})
			return err
		}},
		{"lc forced on an all-gather", "cuda", ErrNotSupported, func() error {
			_, err := g.AllGather(ctx, out.Span, in.Span, coll.Float32, WithAlgo(coll.AlgoLowContention))
			return err
		}},
		{"all-gather with a short output", "", ErrInvalid, func() error {
			_, err := g.AllGather(ctx, coll.Span{Ptr: out.Ptr, Len: 4096}, in.Span, coll.Float32)
			return err
		}},
		{"WithAlgo naming no algorithm", "", ErrNotSupported, func() error {
			_, err := g.AllGather(ctx, out.Span, in.Span, coll.Float32, WithAlgo("warp-drive"))
			return err
		}},
		{"WithAlgo(ce) on the CPU backend", "cpu", ErrNotSupported, func() error {
			_, err := g.AllGather(ctx, out.Span, in.Span, coll.Float32, WithAlgo(coll.AlgoCE))
			return err
		}},
		{"WithAlgo(direct) on the GPU backend", "cuda", ErrNotSupported, func() error {
			_, err := g.AllGather(ctx, out.Span, in.Span, coll.Float32, WithAlgo(coll.AlgoDirect))
			return err
		}},
		{"WithAlgo(kernel) on an int32 all-reduce (the kernels sum floats)", "cuda", ErrRefused, func() error {
			_, err := g.AllReduce(ctx, in.Span, in.Span, coll.Int32, coll.Sum, WithAlgo(coll.AlgoKernel))
			return err
		}},
		{"NewGroup with different ranks", "", ErrMismatch, func() error {
			_, err := w.NewGroup(ctx, "differ", []int{me})
			return err
		}},
		{"a collective on a group this rank is not in", "", ErrNotMember, func() error {
			solo, err := w.NewGroup(ctx, "solo", []int{0})
			if err != nil {
				return err
			}
			if me == 0 {
				return nil // the member (a 1-rank collective is issue 11's)
			}
			if p := solo.Explain(coll.AllReduce, 4096, true); !strings.Contains(p.Reason, "not a member") {
				return fmt.Errorf("Explain on a group this rank is not in: %+v", p)
			}
			_, err = solo.AllReduce(ctx, in.Span, in.Span, coll.Float32, coll.Sum)
			return err
		}},
		{"OpenScope on a closed group", "", ErrGroupClosed, func() error {
			x, err := w.NewGroup(ctx, "closing", g.Ranks())
			if err != nil {
				return err
			}
			if err := x.Close(ctx); err != nil {
				return err
			}
			_, err = x.OpenScope()
			return err
		}},
		{"Scope.End after rank-dependent allocations", "", ErrMismatch, func() error {
			// Both ranks allocate past their segments, with different
			// sizes: each registers a segment the other's does not match.
			sc, err := g.OpenScope()
			if err != nil {
				return err
			}
			if _, err := sc.Alloc(int64(96<<20 + me*(64<<20))); err != nil {
				return err
			}
			return sc.End(ctx)
		}},
	}
	var failed []string
	for _, c := range cases {
		if c.only != "" && c.only != backend {
			continue
		}
		err := c.call()
		switch {
		case c.want == ErrNotMember && me == 0 && err == nil: // the member
		case !errors.Is(err, c.want):
			failed = append(failed, fmt.Sprintf("%s: got %v, want an error matching %v", c.name, err, c.want))
		default:
			fmt.Printf("ok %s: %v\n", c.name, err)
		}
	}
	w.Close() // the mismatched scope may leave the pool unable to agree
	if _, err := w.Alloc(64); !errors.Is(err, ErrClosed) {
		failed = append(failed, fmt.Sprintf("Alloc after Close: %v, want ErrClosed", err))
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	return nil
}
