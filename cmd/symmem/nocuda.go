//go:build !cgo

package main

import (
	"context"
	"errors"
	"time"

	"github.com/symmem/symmem/bench"
)

func cudaAvailable() bool { return false }

func newCUDATarget(context.Context, time.Duration) (bench.Target, func() error, error) {
	return nil, nil, errors.New("this symmem binary was built without cgo (CGO_ENABLED=0); the cuda backend needs cgo: rebuild with CGO_ENABLED=1")
}

func cudaDescribe(bench.Target) string { return "" }
