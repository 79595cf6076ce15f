package nccl

import (
	"context"
	"fmt"
	"github.com/symmem/symmem/internal/errs"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/native/libnccl"
)

// Collectives enqueue one NCCL call on stream (a CUstream handle; 0 = the
// legacy default stream) and return without waiting for the GPU. Counts are
// elements: per rank for AllGather (in holds count, out count*Size) and
// ReduceScatter (in holds count*Size, out count); the whole buffer for
// AllReduce and Broadcast. Buffers inside registered windows (at the same
// offsets on every rank) let NCCL use its symmetric kernels; otherwise the
// same call runs NCCL's ordinary kernels.

// AllGather is ncclAllGather.
func (c *Comm) AllGather(in, out uint64, count int64, dt coll.DType, stream uint64) error {
	ndt, err := c.args("all-gather", in, out, count, dt)
	if err != nil {
		return err
	}
	return c.enqueue("ncclAllGather", func() error {
		return c.lib.AllGather(c.cuctx, c.h.Comm, in, out, count, ndt, uintptr(stream))
	})
}

// ReduceScatter is ncclReduceScatter.
func (c *Comm) ReduceScatter(in, out uint64, count int64, dt coll.DType, op coll.ReduceOp, stream uint64) error {
	ndt, nop, err := c.reduceArgs("reduce-scatter", in, out, count, dt, op)
	if err != nil {
		return err
	}
	return c.enqueue("ncclReduceScatter", func() error {
		return c.lib.ReduceScatter(c.cuctx, c.h.Comm, in, out, count, ndt, nop, uintptr(stream))
	})
}

// AllReduce is ncclAllReduce.
func (c *Comm) AllReduce(in, out uint64, count int64, dt coll.DType, op coll.ReduceOp, stream uint64) error {
	ndt, nop, err := c.reduceArgs("all-reduce", in, out, count, dt, op)
	if err != nil {
		return err
	}
	return c.enqueue("ncclAllReduce", func() error {
		return c.lib.AllReduce(c.cuctx, c.h.Comm, in, out, count, ndt, nop, uintptr(stream))
	})
}

// Broadcast is ncclBroadcast: out on every rank = in of rank root (in is
// read on root only; in == out is in place).
func (c *Comm) Broadcast(in, out uint64, count int64, dt coll.DType, root int, stream uint64) error {
	ndt, err := c.args("broadcast", in, out, count, dt)
	if err != nil {
		return err
	}
	if root < 0 || root >= c.size {
		return fmt.Errorf("nccl: group %q: broadcast root %d is outside the group of %d ranks", c.group, root, c.size)
	}
	return c.enqueue("ncclBroadcast", func() error {
		return c.lib.Broadcast(c.cuctx, c.h.Comm, in, out, count, ndt, root, uintptr(stream))
	})
}

// AllToAll is an all-to-all of equal blocks, count elements per rank:
// ncclAlltoAll where NCCL has it, else one group of ncclSend and ncclRecv.
func (c *Comm) AllToAll(in, out uint64, count int64, dt coll.DType, stream uint64) error {
	ndt, err := c.args("all-to-all", in, out, count, dt)
	if err != nil {
		return err
	}
	if c.lib.HasAllToAll {
		return c.enqueue("ncclAlltoAll", func() error {
			return c.lib.AllToAll(c.cuctx, c.h.Comm, in, out, count, ndt, uintptr(stream))
		})
	}
	counts := make([]int64, c.size)
	for j := range counts {
		counts[j] = count
	}
	return c.allToAllV(in, out, counts, counts, ndt, dt.Size(), stream)
}

// AllToAllV is an all-to-all with split counts: send[j] elements to rank
// j and recv[i] from rank i, packed in rank order from in and out, as one
// group of ncclSend and ncclRecv. Every rank's counts must match its
// peers' (the GPU backend checks the whole matrix first): NCCL would hang
// or fail on a difference.
func (c *Comm) AllToAllV(in, out uint64, send, recv []int64, dt coll.DType, stream uint64) error {
	if len(send) != c.size || len(recv) != c.size {
		return fmt.Errorf("nccl: group %q: all-to-all: %d send and %d receive counts for %d ranks", c.group, len(send), len(recv), c.size)
	}
	var total int64
	for j := range send {
		total += send[j] + recv[j]
	}
	ndt, err := c.args("all-to-all", in, out, total, dt)
	if err != nil {
		return err
	}
	return c.allToAllV(in, out, send, recv, ndt, dt.Size(), stream)
}

func (c *Comm) allToAllV(in, out uint64, send, recv []int64, ndt libnccl.DataType, es int, stream uint64) error {
	sp, rp := make([]uint64, c.size), make([]uint64, c.size)
	var so, ro uint64
	for j := range c.size {
		sp[j], rp[j] = in+so, out+ro
		so, ro = so+uint64(send[j])*uint64(es), ro+uint64(recv[j])*uint64(es)
	}
	return c.enqueue("ncclSend/ncclRecv", func() error {
		return c.lib.AllToAllV(c.cuctx, c.h.Comm, sp, send, rp, recv, ndt, uintptr(stream))
	})
}

// enqueue makes one NCCL call under the communicator's lock once the
// communicator is usable, and settles its result (an asynchronous failure
// breaks the communicator).
func (c *Comm) enqueue(name string, call func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	return c.settle(context.Background(), name, call())
}

// reduceArgs is args plus NCCL's reduction op.
func (c *Comm) reduceArgs(what string, in, out uint64, count int64, dt coll.DType, op coll.ReduceOp) (libnccl.DataType, libnccl.RedOp, error) {
	ndt, err := c.args(what, in, out, count, dt)
	if err != nil {
		return 0, 0, err
	}
	nop, err := libnccl.RedOpOf(op)
	if err != nil {
		return 0, 0, err
	}
	return ndt, nop, nil
}

func (c *Comm) args(what string, in, out uint64, count int64, dt coll.DType) (libnccl.DataType, error) {
	ndt, err := libnccl.DataTypeOf(dt)
	if err != nil {
		return 0, fmt.Errorf("nccl: group %q: %s: %w", c.group, what, err)
	}
	if count < 0 {
		return 0, fmt.Errorf("nccl: group %q: %s: count %d is negative", c.group, what, count)
	}
	if count > 0 && (in == 0 || out == 0) {
		return 0, fmt.Errorf("nccl: group %q: %s: null buffer (in %#x, out %#x)", c.group, what, in, out)
	}
	return ndt, nil
}

// Run executes a backend request with NCCL and reports the path: AlgoNCCL
// for ordinary buffers, AlgoNCCLWindow when every buffer lies inside a
// symmetric window. req.Algo = AlgoNCCLWindow with a buffer outside the
// windows fails with ErrNotWindow (the user API then stages through the
// pool); AlgoAuto, AlgoNCCL and "" are accepted, anything else is refused.
func (c *Comm) Run(ctx context.Context, req backend.Request) (coll.Path, error) {
	inLen, outLen, err := spanCounts(req, c.size)
	if err != nil {
		return coll.Path{}, fmt.Errorf("nccl: group %q: %w", c.group, err)
	}
	in := req.In.Ptr
	if req.Kind == coll.Broadcast {
		in = req.Out.Ptr
	}
	return c.RunDecided(ctx, req, c.Windowed(in, inLen) && c.Windowed(req.Out.Ptr, outLen))
}

// RunDecided is Run with the window decision made by the caller (win: every
// buffer lies inside a window of this communicator); the GPU backend decides
// once per call and passes it here. req's shape must be valid (Shaped).
//
// ctx is consulted once, before NCCL is called: a done context refuses the
// call. It does not bound the call: NCCL's enqueue takes no context, and
// the wait for a call a non-blocking communicator left in progress is
// bounded by the communicator's timeout (settle). A caller whose peers may
// already wait for this rank's call (the GPU backend, once its call gate
// published it) passes a context that cannot end (context.WithoutCancel),
// so the call is always made.
func (c *Comm) RunDecided(ctx context.Context, req backend.Request, win bool) (coll.Path, error) {
	var err error
	in, inLen, outLen := req.In.Ptr, req.In.Len, req.Out.Len
	if req.Kind == coll.Broadcast {
		in = req.Out.Ptr
	}
	path := coll.Path{Algo: coll.AlgoNCCL, Reason: "buffers outside NCCL windows"}
	if win {
		path = coll.Path{Algo: coll.AlgoNCCLWindow, Reason: "buffers inside NCCL symmetric windows"}
	}
	switch req.Algo {
	case "", coll.AlgoAuto:
	case coll.AlgoNCCL:
		if win {
			path.Reason = "nccl requested; buffers are in windows, so NCCL may use its symmetric kernels"
		} else {
			path.Reason = "nccl requested"
		}
	case coll.AlgoNCCLWindow:
		if !win {
			return path, fmt.Errorf("nccl: group %q: %v with nccl-window: %w (in %#x+%d, out %#x+%d); allocate from the pool inside a scope",
				c.group, req.Kind, ErrNotWindow, in, inLen, req.Out.Ptr, outLen)
		}
	default:
		return path, fmt.Errorf("nccl: group %q: algorithm %q is not an NCCL path (want nccl or nccl-window)", c.group, req.Algo)
	}
	if err := ctx.Err(); err != nil {
		return path, err
	}
	switch req.Kind {
	case coll.AllGather:
		err = c.AllGather(req.In.Ptr, req.Out.Ptr, req.Count, req.DType, req.Stream)
	case coll.ReduceScatter:
		err = c.ReduceScatter(req.In.Ptr, req.Out.Ptr, req.Count, req.DType, req.Op, req.Stream)
	case coll.AllReduce:
		err = c.AllReduce(req.In.Ptr, req.Out.Ptr, req.Count, req.DType, req.Op, req.Stream)
	case coll.Broadcast:
		err = c.Broadcast(req.Out.Ptr, req.Out.Ptr, req.Count, req.DType, req.Root, req.Stream)
	case coll.AllToAll:
		err = c.runAllToAll(req)
	default:
		err = fmt.Errorf("nccl: group %q: unknown collective %v", c.group, req.Kind)
	}
	return path, err
}

// runAllToAll is an all-to-all request: equal blocks or host split counts
// (clipped to the request's window [Lo, Hi) where it has one); split
// counts on the device are not NCCL's to read.
func (c *Comm) runAllToAll(req backend.Request) error {
	switch req.A2A.Kind() {
	case backend.SplitsEqual:
		return c.AllToAll(req.In.Ptr, req.Out.Ptr, req.Count, req.DType, req.Stream)
	case backend.SplitsHost:
		send, recv := req.A2A.Send, req.A2A.Recv
		if a := req.A2A; a.Hi > 0 {
			clip := func(cs []int64) []int64 {
				out := make([]int64, len(cs))
				for j, k := range cs {
					out[j] = min(max(k-a.Lo, 0), a.Hi-a.Lo)
				}
				return out
			}
			send, recv = clip(send), clip(recv)
		}
		return c.AllToAllV(req.In.Ptr, req.Out.Ptr, send, recv, req.DType, req.Stream)
	}
	return fmt.Errorf("nccl: group %q: all-to-all with %v: NCCL reads no split counts on the device: %w", c.group, req.A2A.Kind(), errs.NotSupported)
}

// spanCounts checks req's spans against its count and returns the byte
// lengths the collective touches in In and Out.
func spanCounts(req backend.Request, n int) (inLen, outLen int64, err error) {
	if !req.DType.Valid() {
		return 0, 0, fmt.Errorf("%v: unknown dtype %v", req.Kind, req.DType)
	}
	if req.Count < 0 {
		return 0, 0, fmt.Errorf("%v: count %d is negative", req.Kind, req.Count)
	}
	switch req.Kind {
	case coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast:
	default:
		return 0, 0, fmt.Errorf("unknown collective %v", req.Kind)
	}
	inLen, outLen = backend.IOBytes(req.Kind, req.DType, req.Count, n)
	if req.Kind != coll.Broadcast && req.In.Len < inLen {
		return 0, 0, fmt.Errorf("%v of %d %v: input span holds %d bytes, needs %d", req.Kind, req.Count, req.DType, req.In.Len, inLen)
	}
	if req.Out.Len < outLen {
		return 0, 0, fmt.Errorf("%v of %d %v: output span holds %d bytes, needs %d", req.Kind, req.Count, req.DType, req.Out.Len, outLen)
	}
	return inLen, outLen, nil
}
