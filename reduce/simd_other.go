//go:build !amd64 || purego

package reduce

import "github.com/symmem/symmem/coll"

// No vector kernels here: the pure-Go loops run.

func vecNative(coll.DType) *nativeKernels { return nil }

func vecHalf(bool) *halfKernels { return nil }
