package nccl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/native/libnccl"
)

// TestBounded: a call that never returns (a peer died inside NCCL) ends in
// libnccl.ErrTimeout at the deadline; a call that returns gives its result.
func TestBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	block := make(chan struct{})
	defer close(block)
	start := time.Now()
	_, err := bounded(ctx, "ncclCommInitRankConfig", func() (int, error) { <-block; return 0, nil })
	if !errors.Is(err, libnccl.ErrTimeout) {
		t.Fatalf("got %v, want libnccl.ErrTimeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("returned after %v", d)
	}
	v, err := bounded(context.Background(), "x", func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("got %v, %v", v, err)
	}
}
