package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGenerated: the committed kernels and kernel_layout.go are exactly what
// the generator writes. After changing the generator run
//
//	go generate ./internal/backend/cuda
func TestGenerated(t *testing.T) {
	files, err := outputs()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/backend/cuda/%s differs from the generator's output: run go generate ./internal/backend/cuda", name)
		}
	}
}

// TestFragmentsShared: the signalling protocol exists once. Each kernel
// waits exactly twice (ready, done), each wait traps on the watchdog, and
// every kernel starts with the same parameter load.
func TestFragmentsShared(t *testing.T) {
	var load ptx
	load.loadParams()
	for name, src := range map[string]string{"allgather": allGather(), "allreduce": allReduce()} {
		if c := bytes.Count([]byte(src), []byte("@%p6 trap;")); c != 2 {
			t.Errorf("%s: %d watchdog traps, want 2", name, c)
		}
		if c := bytes.Count([]byte(src), []byte("ld.acquire.sys.global.u32")); c != 2 {
			t.Errorf("%s: %d acquire loads, want 2", name, c)
		}
		if !bytes.Contains([]byte(src), []byte(load.b.String())) {
			t.Errorf("%s does not start with the shared parameter load", name)
		}
		if !bytes.HasPrefix([]byte(src), []byte("// "+generatedLine+"\n")) {
			t.Errorf("%s lacks the generated-code line", name)
		}
	}
}
