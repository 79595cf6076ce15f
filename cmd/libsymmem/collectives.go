package main

// #include <stdint.h>
import "C"

import (
	"context"
	"fmt"
	"math"
	"strings"
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

// Algorithm codes of symmem_collective (SYMMEM_ALGO_*): the index in
// coll.Algos(), whose order is append-only for this reason.
var algos = coll.Algos()

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

func algoCode(c uint64) (coll.Algo, error) {
	if c < uint64(len(algos)) {
		return algos[c], nil
	}
	return "", fmt.Errorf("algorithm code %d is not a SYMMEM_ALGO_* value (%s): %w", c, algoCodes, symmem.ErrInvalid)
}

// algoCodes lists the algorithm codes for algoCode's error.
var algoCodes = func() string {
	var s []string
	for i, a := range algos {
		s = append(s, fmt.Sprintf("%s %d", a, i))
	}
	return strings.Join(s, ", ")
}()

// pathCode is the path code (SYMMEM_PATH_*) of p.
func pathCode(p coll.Path) C.int {
	c, _ := coll.PathCode(p.Algo) // a path ran: never auto
	if p.Staged {
		c |= coll.PathStaged
	}
	return C.int(c)
}

// args is one collective call as C passed it: in and out hold as many
// elements of dtype as each op's definition in the header says for count.
type args struct {
	kind            coll.Kind
	in, out         uint64
	count           uint64
	dtype, op, root int
	stream          uint64
	algo            coll.Algo
	err             error // from decoding algo (reported with the call's other argument errors)
}

// collective runs one call on group handle gh and returns its path code.
func collective(gh uint64, a args) C.int {
	g, err := lookup[*group](gh, "group")
	if err != nil {
		return fail(err)
	}
	k := a.kind
	dt, err := dtypeArg(C.int(a.dtype))
	var red coll.ReduceOp
	if err == nil && (k == coll.ReduceScatter || k == coll.AllReduce) {
		red, err = opArg(C.int(a.op))
	}
	if err == nil {
		err = a.err
	}
	n, es := int64(g.g.Size()), int64(dt.Size())
	if err == nil && (a.count > math.MaxInt64 || int64(a.count) > math.MaxInt64/es/max(n, 1)) {
		err = fmt.Errorf("count %d overflows: %w", a.count, symmem.ErrInvalid)
	}
	if err != nil {
		g.setLast(coll.Path{}) // as for the library's refusals below: no path is left from an earlier call
		return fail(fmt.Errorf("symmem: %v on group %q: %w", k, g.g.Name(), err))
	}
	c := int64(a.count) * es
	ctx := context.Background()
	// Options are values (no allocation); the array stays on the stack.
	opts := [2]symmem.CallOption{symmem.WithAlgo(a.algo), symmem.WithStream(a.stream)}
	in := func(b int64) coll.Span { return coll.Span{Ptr: a.in, Len: b} }
	out := func(b int64) coll.Span { return coll.Span{Ptr: a.out, Len: b} }
	var p coll.Path
	switch k {
	case coll.AllGather:
		p, err = g.g.AllGather(ctx, out(c*n), in(c), dt, opts[:]...)
	case coll.ReduceScatter:
		p, err = g.g.ReduceScatter(ctx, out(c), in(c*n), dt, red, opts[:]...)
	case coll.AllReduce:
		p, err = g.g.AllReduce(ctx, out(c), in(c), dt, red, opts[:]...)
	case coll.Broadcast:
		p, err = g.g.Broadcast(ctx, out(c), a.root, dt, opts[:]...)
	case coll.AllToAll:
		p, err = g.g.AllToAll(ctx, out(c*n), in(c*n), dt, opts[:]...)
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
	a, err := algoArg(algo)
	return collective(uint64(gh), args{kind: coll.AllGather, in: addr(in), out: addr(out), count: uint64(count), dtype: int(dtype),
		stream: addr(stream), algo: a, err: err})
}

//export symmem_reduce_scatter
func symmem_reduce_scatter(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype, op C.int, stream unsafe.Pointer, algo *C.char) C.int {
	a, err := algoArg(algo)
	return collective(uint64(gh), args{kind: coll.ReduceScatter, in: addr(in), out: addr(out), count: uint64(count), dtype: int(dtype),
		op: int(op), stream: addr(stream), algo: a, err: err})
}

//export symmem_all_reduce
func symmem_all_reduce(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype, op C.int, stream unsafe.Pointer, algo *C.char) C.int {
	a, err := algoArg(algo)
	return collective(uint64(gh), args{kind: coll.AllReduce, in: addr(in), out: addr(out), count: uint64(count), dtype: int(dtype),
		op: int(op), stream: addr(stream), algo: a, err: err})
}

//export symmem_broadcast
func symmem_broadcast(gh C.uint64_t, buf unsafe.Pointer, count C.size_t, dtype, root C.int, stream unsafe.Pointer, algo *C.char) C.int {
	a, err := algoArg(algo)
	return collective(uint64(gh), args{kind: coll.Broadcast, in: addr(buf), out: addr(buf), count: uint64(count), dtype: int(dtype),
		root: int(root), stream: addr(stream), algo: a, err: err})
}

// Kinds of symmem_collective (symmem_kind values).
var kinds = [...]coll.Kind{coll.AllGather, coll.ReduceScatter, coll.AllReduce, coll.Broadcast, coll.AllToAll}

// unpack decodes symmem_collective's call word (SYMMEM_CALL in the header):
// kind | dtype<<8 | op<<16 | algo<<24 | root<<32, 8 bits each but root's 32.
func unpack(call uint64) (args, error) {
	kc := call & 0xff
	if kc >= uint64(len(kinds)) {
		return args{}, fmt.Errorf("symmem_collective: kind %d in call %#x is not a symmem_kind (all-gather 0, reduce-scatter 1, all-reduce 2, broadcast 3, all-to-all 4): %w",
			kc, call, symmem.ErrInvalid)
	}
	a := args{kind: kinds[kc], dtype: int(call >> 8 & 0xff), op: int(call >> 16 & 0xff), root: int(int32(uint32(call >> 32)))}
	a.algo, a.err = algoCode(call >> 24 & 0xff)
	return a, nil
}

// symmem_collective is the collectives with one count in one call with six
// pointer-sized arguments: an FFI pays per argument, and least for
// pointer-sized ones. The Python package calls it through
// symmem_py_collective (pycall.c).
//
//export symmem_collective
func symmem_collective(gh C.uint64_t, call C.uint64_t, in, out unsafe.Pointer, count C.size_t, stream unsafe.Pointer) C.int {
	return collectiveWord(uint64(gh), uint64(call), addr(in), addr(out), uint64(count), addr(stream))
}

// collectiveWord decodes the call word and runs the call.
func collectiveWord(gh, call, in, out, count, stream uint64) C.int {
	a, err := unpack(call)
	if err != nil {
		return fail(err)
	}
	a.in, a.out, a.count, a.stream = in, out, count, stream
	if a.kind == coll.Broadcast {
		if a.in != 0 && a.in != a.out {
			return fail(fmt.Errorf("symmem_collective: broadcast is in place: pass its buffer as out and NULL (or the same buffer) as in, not in=%#x out=%#x: %w",
				a.in, a.out, symmem.ErrInvalid))
		}
		a.in = a.out
	}
	return collective(gh, a)
}

//export symmem_all_to_all
func symmem_all_to_all(gh C.uint64_t, in, out unsafe.Pointer, count C.size_t, dtype C.int, stream unsafe.Pointer, algo *C.char) C.int {
	a, err := algoArg(algo)
	return collective(uint64(gh), args{kind: coll.AllToAll, in: addr(in), out: addr(out), count: uint64(count), dtype: int(dtype),
		stream: addr(stream), algo: a, err: err})
}

//export symmem_all_to_all_v
func symmem_all_to_all_v(gh C.uint64_t, in, out unsafe.Pointer, inCount, outCount C.size_t, sendCounts, recvCounts *C.int64_t, dtype C.int, stream unsafe.Pointer, algo *C.char) C.int {
	g, dt, opts, err := splitsCall(uint64(gh), dtype, stream, algo)
	if err == nil && (sendCounts == nil || recvCounts == nil) {
		err = fmt.Errorf("send_counts or recv_counts is NULL (want %d counts each): %w", g.g.Size(), symmem.ErrInvalid)
	}
	inSpan, outSpan, cerr := capacities(in, out, inCount, outCount, dt)
	if err == nil {
		err = cerr
	}
	if err != nil {
		return splitsFail(g, err)
	}
	n := g.g.Size()
	send := unsafe.Slice((*int64)(unsafe.Pointer(sendCounts)), n)
	recv := unsafe.Slice((*int64)(unsafe.Pointer(recvCounts)), n)
	p, err := g.g.AllToAllV(context.Background(), outSpan, inSpan, send, recv, dt, opts[:]...)
	return splitsDone(g, p, err)
}

//export symmem_all_to_all_vdev
func symmem_all_to_all_vdev(gh C.uint64_t, in, out unsafe.Pointer, inCount, outCount C.size_t, splits, splitsOut *C.int64_t, dtype C.int, stream unsafe.Pointer, algo *C.char) C.int {
	g, dt, opts, err := splitsCall(uint64(gh), dtype, stream, algo)
	inSpan, outSpan, cerr := capacities(in, out, inCount, outCount, dt)
	if err == nil {
		err = cerr
	}
	if err != nil {
		return splitsFail(g, err)
	}
	n := int64(g.g.Size())
	p, err := g.g.AllToAllVDev(context.Background(), outSpan, inSpan, coll.Span{Ptr: addr(unsafe.Pointer(splits)), Len: 8 * n},
		coll.Span{Ptr: addr(unsafe.Pointer(splitsOut)), Len: 16 * n}, dt, opts[:]...)
	return splitsDone(g, p, err)
}

// capacities are in and out of inCount and outCount elements of dt.
func capacities(in, out unsafe.Pointer, inCount, outCount C.size_t, dt coll.DType) (coll.Span, coll.Span, error) {
	es := uint64(dt.Size())
	if uint64(inCount) > math.MaxInt64/es || uint64(outCount) > math.MaxInt64/es {
		return coll.Span{}, coll.Span{}, fmt.Errorf("in_count %d or out_count %d overflows: %w", uint64(inCount), uint64(outCount), symmem.ErrInvalid)
	}
	return coll.Span{Ptr: addr(in), Len: int64(uint64(inCount) * es)}, coll.Span{Ptr: addr(out), Len: int64(uint64(outCount) * es)}, nil
}

// splitsCall decodes the arguments the all-to-alls with split counts share
// with the other collectives.
func splitsCall(gh uint64, dtype C.int, stream unsafe.Pointer, algo *C.char) (*group, coll.DType, [2]symmem.CallOption, error) {
	g, err := lookup[*group](gh, "group")
	if err != nil {
		return nil, 0, [2]symmem.CallOption{}, err
	}
	a, err := algoArg(algo)
	dt, derr := dtypeArg(dtype)
	if err == nil {
		err = derr
	}
	return g, dt, [2]symmem.CallOption{symmem.WithAlgo(a), symmem.WithStream(addr(stream))}, err
}

func splitsFail(g *group, err error) C.int {
	if g == nil {
		return fail(err)
	}
	g.setLast(coll.Path{})
	return fail(fmt.Errorf("symmem: %v on group %q: %w", coll.AllToAll, g.g.Name(), err))
}

func splitsDone(g *group, p coll.Path, err error) C.int {
	if err != nil {
		g.setLast(coll.Path{})
		return fail(err)
	}
	g.setLast(p)
	return pathCode(p)
}
