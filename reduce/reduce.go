package reduce

import (
	"errors"
	"fmt"

	"github.com/symmem/symmem/coll"
)

// Sentinel errors, wrapped by every error this package returns.
var (
	ErrLength = errors.New("reduce: bad buffer length")
	ErrDType  = errors.New("reduce: unknown dtype")
	ErrOp     = errors.New("reduce: unknown reduction op")
)

// ReduceN computes dst = srcs[0] op ... op srcs[k-1] elementwise in one pass,
// overwriting dst without reading it (k >= 1). dst may be one of the sources
// (in place). This is the Reduce step of a plan: a reduce-scatter writes its
// output straight from the peers' inputs.
func ReduceN(dst []byte, srcs [][]byte, dt coll.DType, op coll.ReduceOp) error {
	if err := check("ReduceN", dst, srcs, dt, op, 1); err != nil {
		return err
	}
	run(dst, srcs, dt, op, true)
	return nil
}

// Finish completes a reduction over n contributions: Avg divides every
// element by n (floats in their precision, 16-bit floats through float32 with
// one rounding, integers truncating toward zero); other ops leave dst as is.
func Finish(dst []byte, dt coll.DType, op coll.ReduceOp, n int) error {
	if err := check("Finish", dst, nil, dt, op, 0); err != nil {
		return err
	}
	if op != coll.Avg {
		return nil
	}
	if n < 1 {
		return fmt.Errorf("reduce.Finish: average over %d contributions (want n >= 1): %w", n, ErrLength)
	}
	finishAvg(dst, dt, n, true)
	return nil
}

func check(fn string, dst []byte, srcs [][]byte, dt coll.DType, op coll.ReduceOp, minSrcs int) error {
	if !dt.Valid() {
		return fmt.Errorf("reduce.%s: %v (want one of %v): %w", fn, dt, coll.DTypes(), ErrDType)
	}
	if op < coll.Sum || op > coll.Max {
		return fmt.Errorf("reduce.%s: %v (want sum, avg, min or max): %w", fn, op, ErrOp)
	}
	if len(srcs) < minSrcs {
		return fmt.Errorf("reduce.%s: %d sources, want at least %d: %w", fn, len(srcs), minSrcs, ErrLength)
	}
	if sz := dt.Size(); len(dst)%sz != 0 {
		return fmt.Errorf("reduce.%s: dst has %d bytes, not a multiple of the %s element size %d: %w",
			fn, len(dst), dt, sz, ErrLength)
	}
	for i, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("reduce.%s: source %d has %d bytes but dst has %d (lengths must match): %w",
				fn, i, len(s), len(dst), ErrLength)
		}
	}
	return nil
}
