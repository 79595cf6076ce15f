package cudadrv

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Op kinds (mirror SYMC_OP_* in shim.h).
const (
	OpCtx       = 1
	OpWrite32   = 2
	OpWait32    = 3
	OpCopy      = 4
	OpRecord    = 5
	OpWaitEvent = 6
	OpBatch     = 7
	OpMemset32  = 8
	OpGraph     = 9
	OpLaunch    = 10
	OpFence     = 11
)

// Wait flags (CUstreamWaitValue_flags).
const (
	WaitGEQ = 0x0 // cyclic: (int32)(*addr - value) >= 0, so epochs may wrap
	WaitEQ  = 0x1
)

// Op is one step of a Program; its layout mirrors symc_op (40 bytes).
type Op struct {
	Kind    int32
	Flags   uint32
	Stream  uint64
	A, B, C uint64
}

// Program is a reusable list of stream operations issued in one cgo call.
// Build it with the methods below, run it with Exec, Reset and rebuild (the
// backing array is kept, so steady-state use does not allocate). A Program
// is not safe for concurrent use.
type Program struct {
	ops   []Op
	batch int // index of the open batch header, -1 if none
	// NoBatch issues memory operations one call each (for graph capture,
	// where each becomes its own node anyway).
	NoBatch bool
	failed  C.int // the failing op's index, written by Exec's C side (a local would escape: one allocation per call)
}

// NewProgram returns an empty program with room for n ops.
func NewProgram(n int) *Program { return &Program{ops: make([]Op, 0, n), batch: -1} }

// Reset empties the program.
func (p *Program) Reset() { p.ops, p.batch = p.ops[:0], -1 }

// Ops returns the ops built so far (for inspection; do not modify).
func (p *Program) Ops() []Op { return p.ops }

// Len is the number of ops.
func (p *Program) Len() int { return len(p.ops) }

// SetContext makes c current for the ops that follow. Every program that
// touches streams must start with it.
func (p *Program) SetContext(c *Context) {
	p.ops = append(p.ops, Op{Kind: OpCtx, A: uint64(uintptr(unsafe.Pointer(c.h)))})
}

// Write32 writes v to the 32-bit word at addr (local or peer-mapped) once the
// stream's earlier work is done; a memory fence orders those earlier writes
// before it.
func (p *Program) Write32(stream, addr uint64, v uint32) {
	p.ops = append(p.ops, Op{Kind: OpWrite32, Stream: stream, A: addr, B: uint64(v)})
}

// Wait32 makes the stream wait until the word at addr reaches v (cyclic >=).
func (p *Program) Wait32(stream, addr uint64, v uint32) {
	p.ops = append(p.ops, Op{Kind: OpWait32, Flags: WaitGEQ, Stream: stream, A: addr, B: uint64(v)})
}

// Wait32EQ makes the stream wait until the word at addr equals v.
func (p *Program) Wait32EQ(stream, addr uint64, v uint32) {
	p.ops = append(p.ops, Op{Kind: OpWait32, Flags: WaitEQ, Stream: stream, A: addr, B: uint64(v)})
}

// Copy enqueues an asynchronous device-to-device copy (copy engine).
func (p *Program) Copy(stream, dst, src uint64, n int64) {
	p.ops = append(p.ops, Op{Kind: OpCopy, Stream: stream, A: dst, B: src, C: uint64(n)})
}

// Memset32 enqueues an asynchronous fill of n words.
func (p *Program) Memset32(stream, dst uint64, v uint32, n int64) {
	p.ops = append(p.ops, Op{Kind: OpMemset32, Stream: stream, A: dst, B: uint64(v), C: uint64(n)})
}

// Record records event on stream.
func (p *Program) Record(stream, event uint64) {
	p.ops = append(p.ops, Op{Kind: OpRecord, Stream: stream, A: event})
}

// Fence records event on stream unless the stream is being captured (then
// the work is the graph's, which runs later): one op instead of a separate
// cuStreamIsCapturing call.
func (p *Program) Fence(stream, event uint64) {
	p.ops = append(p.ops, Op{Kind: OpFence, Stream: stream, A: event})
}

// WaitEvent makes stream wait for event.
func (p *Program) WaitEvent(stream, event uint64) {
	p.ops = append(p.ops, Op{Kind: OpWaitEvent, Stream: stream, A: event})
}

// BeginBatch starts a group of Write32/Wait32 ops on stream that Exec issues
// as one cuStreamBatchMemOp (in order), or one by one where the driver lacks
// it. EndBatch closes the group.
func (p *Program) BeginBatch(stream uint64) {
	p.batch = len(p.ops)
	p.ops = append(p.ops, Op{Kind: OpBatch, Stream: stream})
}

// EndBatch closes the group opened by BeginBatch. A group of one op is
// issued as a plain call.
func (p *Program) EndBatch() {
	if p.batch < 0 {
		return
	}
	n := len(p.ops) - p.batch - 1
	switch {
	case n <= 1 || n > 32 || p.NoBatch:
		// Not worth a batch (or too long): drop the header, keep the ops.
		copy(p.ops[p.batch:], p.ops[p.batch+1:])
		p.ops = p.ops[:len(p.ops)-1]
	default:
		p.ops[p.batch].A = uint64(n)
	}
	p.batch = -1
}

var opNames = map[int32]string{OpCtx: "cuCtxSetCurrent", OpWrite32: "cuStreamWriteValue32", OpWait32: "cuStreamWaitValue32",
	OpCopy: "cuMemcpyDtoDAsync", OpRecord: "cuEventRecord", OpWaitEvent: "cuStreamWaitEvent", OpBatch: "cuStreamBatchMemOp",
	OpMemset32: "cuMemsetD32Async", OpGraph: "cuGraphLaunch", OpLaunch: "cuLaunchKernel",
	OpFence: "cuStreamIsCapturing/cuEventRecord"}

// Exec issues every op in one cgo call. On failure nothing after the failing
// op was issued; the error names the op.
func (p *Program) Exec() error {
	if p.batch >= 0 {
		return fmt.Errorf("cuda: program has an open batch (missing EndBatch)")
	}
	if len(p.ops) == 0 {
		return nil
	}
	r := C.symc_exec((*C.symc_op)(unsafe.Pointer(&p.ops[0])), C.int(len(p.ops)), &p.failed)
	if r == 0 {
		return nil
	}
	i := int(p.failed)
	o := p.ops[i]
	return fmt.Errorf("cuda: op %d of %d (%s stream=%#x a=%#x b=%#x c=%d): %w", i, len(p.ops), opNames[o.Kind], o.Stream, o.A, o.B, o.C,
		&Error{Call: opNames[o.Kind], Code: int(r), Name: errName(int(r))})
}
