package main

// #include <stdint.h>
import "C"

import (
	"context"
	"fmt"
	"math"
	"unsafe"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/coll"
)

// ncclDTypes maps ncclDataType_t values to symmem's types; the gaps
// (uint32 3, uint64 5) are not supported.
var ncclDTypes = [...]struct {
	dt coll.DType
	ok bool
}{0: {coll.Int8, true}, 1: {coll.Uint8, true}, 2: {coll.Int32, true}, 4: {coll.Int64, true},
	6: {coll.Float16, true}, 7: {coll.Float32, true}, 8: {coll.Float64, true}, 9: {coll.BFloat16, true}}

var ncclOps = [...]struct {
	op coll.ReduceOp
	ok bool
}{0: {coll.Sum, true}, 2: {coll.Max, true}, 3: {coll.Min, true}, 4: {coll.Avg, true}}

func dtypeArg(d C.int) (coll.DType, error) {
	if d >= 0 && int(d) < len(ncclDTypes) && ncclDTypes[d].ok {
		return ncclDTypes[d].dt, nil
	}
	switch d {
	case 3, 5:
		return 0, fmt.Errorf("dtype %d (%s) is not supported (supported: int8 0, uint8 1, int32 2, int64 4, float16 6, float32 7, float64 8, bfloat16 9): %w",
			int(d), map[C.int]string{3: "uint32", 5: "uint64"}[d], symmem.ErrNotSupported)
	}
	return 0, fmt.Errorf("dtype %d is not an ncclDataType_t value (want int8 0, uint8 1, int32 2, int64 4, float16 6, float32 7, float64 8, bfloat16 9): %w",
		int(d), symmem.ErrInvalid)
}

func opArg(o C.int) (coll.ReduceOp, error) {
	if o >= 0 && int(o) < len(ncclOps) && ncclOps[o].ok {
		return ncclOps[o].op, nil
	}
	if o == 1 {
		return 0, fmt.Errorf("reduction 1 (prod) is not supported (supported: sum 0, max 2, min 3, avg 4): %w", symmem.ErrNotSupported)
	}
	return 0, fmt.Errorf("reduction %d is not an ncclRedOp_t value (want sum 0, max 2, min 3, avg 4): %w", int(o), symmem.ErrInvalid)
}

func algoArg(p *C.char) (coll.Algo, error) {
	if p == nil {
		return coll.AlgoAuto, nil
	}
	s := C.GoString(p)
	for _, a := range coll.Algos() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown algorithm %q (want one of %v, or NULL): %w", s, coll.Algos(), symmem.ErrInvalid)
}

// Path codes of include/symmem.h.
const pathStaged = 8

func pathCode(p coll.Path) C.int {
	var c C.int
	switch p.Algo {
	case coll.AlgoNCCL:
		c = 1
	case coll.AlgoNCCLWindow:
		c = 2
	case coll.AlgoCE:
		c = 3
	case coll.AlgoKernel:
		c = 4
	case coll.AlgoTwoShot:
		c = 5
	case coll.AlgoLowContention:
		c = 6
	}
	if p.Staged {
		c |= pathStaged
	}
	return c
}

// collective runs one call: in and out hold inElems and outElems elements
// of count's type, as each op's definition in the header says.
func collective(gh C.uint64_t, k coll.Kind, in, out unsafe.Pointer, count C.size_t, dtype, op, root C.int, stream unsafe.Pointer, algo *C.char) C.int {
	g, err := lookup[*group](uint64(gh), "group")
	if err != nil {
		return fail(err)
	}
	dt, err := dtypeArg(dtype)
	var red coll.ReduceOp
	if err == nil && (k == coll.ReduceScatter || k == coll.AllReduce) {
		red, err = opArg(op)
	}
	var a coll.Algo
	if err == nil {
		a, err = algoArg(algo)
	}
	n, es := int64(g.g.Size()), int64(dt.Size())
	if err == nil && (uint64(count) > math.MaxInt64 || int64(count) > math.MaxInt64/es/max(n, 1)) {
		err = fmt.Errorf("count %d overflows: %w", uint64(count), symmem.ErrInvalid)
	}
	if err != nil {
		return fail(fmt.Errorf("symmem: %v on group %q: %w", k, g.g.Name(), err))
	}
	c := int64(count) * es
	ctx := context.Background()
	var opts []symmem.CallOption // none for the common call: auto, the backend's stream
	if a != coll.AlgoAuto {
		opts = append(opts, symmem.WithAlgo(a))
	}
	if stream != nil {
		opts = append(opts, symmem.WithStream(addr(stream)))
	}
	inSpan := func(b int64) coll.Span { return coll.Span{Ptr: addr(in), Len: b} }
	outSpan := func(b int64) coll.Span { return coll.Span{Ptr: addr(out), Len: b} }
	var p coll.Path
	switch k {
	case coll.AllGather:
		p, err = g.g.AllGather(ctx, outSpan(c*n), inSpan(c), dt, opts...)
	case coll.ReduceScatter:
		p, err = g.g.ReduceScatter(ctx, outSpan(c), inSpan(c*n), dt, red, opts...)
	case coll.AllReduce:
		p, err = g.g.AllReduce(ctx, outSpan(c), inSpan(c), dt, red, opts...)
	case coll.Broadcast:
		p, err = g.g.Broadcast(ctx, outSpan(c), int(root), dt, opts...)
	}
	if err != nil {
		g.setLast(coll.Path{})
		return fail(err)
	}
	g.setLast(p)
	return pathCode(p)
}

//export symmem_all_gather
func symmem_all_gather(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype C.int, stream unsafe.Pointer, algo *C.char) C.int {
	return collective(gh, coll.AllGather, in, out, count, dtype, 0, 0, stream, algo)
}

//export symmem_reduce_scatter
func symmem_reduce_scatter(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype, op C.int, stream unsafe.Pointer, algo *C.char) C.int {
	return collective(gh, coll.ReduceScatter, in, out, count, dtype, op, 0, stream, algo)
}

//export symmem_all_reduce
func symmem_all_reduce(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype, op C.int, stream unsafe.Pointer, algo *C.char) C.int {
	return collective(gh, coll.AllReduce, in, out, count, dtype, op, 0, stream, algo)
}

//export symmem_broadcast
func symmem_broadcast(gh C.uint64_t, buf unsafe.Pointer, count C.size_t, dtype, root C.int, stream unsafe.Pointer, algo *C.char) C.int {
	return collective(gh, coll.Broadcast, buf, buf, count, dtype, 0, root, stream, algo)
}
