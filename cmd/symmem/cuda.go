//go:build cgo

package main

import (
	"context"
	"time"

	cudabackend "github.com/symmem/symmem/backend/cuda"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/internal/native/cuda"
	"github.com/symmem/symmem/rendezvous"
)

// cudaAvailable reports whether libcuda loads and sees a device.
func cudaAvailable() bool {
	if cuda.Load() != nil {
		return false
	}
	n, err := cuda.DeviceCount()
	return err == nil && n > 0
}

// newCUDATarget joins the job on the GPU backend (collective).
func newCUDATarget(ctx context.Context, timeout time.Duration) (bench.Target, func() error, error) {
	env, err := rendezvous.EnvFromOS()
	if err != nil {
		return nil, nil, err
	}
	t, err := cudabackend.NewTarget(ctx, env, cudabackend.TargetOptions{Timeout: timeout})
	if err != nil {
		return nil, nil, err
	}
	return t, t.Close, nil
}

// cudaDescribe is the GPU backend's doctor text for a target from
// newCUDATarget.
func cudaDescribe(t bench.Target) string {
	return t.(*cudabackend.Target).B.Describe()
}
