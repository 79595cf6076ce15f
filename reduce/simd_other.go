//go:build !amd64 || purego

package reduce

import "github.com/symmem/symmem/coll"

// No vector kernels here: the pure-Go loops run, and which NaN a sum of two
// NaNs returns is left to the hardware.

const pinNaN = false

func vecNative(coll.DType) *nativeKernels { return nil }

func vecHalf(bool) *halfKernels { return nil }
