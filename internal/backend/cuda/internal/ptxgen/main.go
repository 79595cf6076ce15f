// Command ptxgen writes symmem's kernels and the Go constants that describe
// their parameter blocks, from one description (run by `go generate` in
// internal/backend/cuda):
//
//	ptx/allgather.ptx   the all-gather push kernel
//	ptx/allreduce.ptx   the one-shot all-reduce pull kernel
//	ptx/reducescatter.ptx the low-contention reduce-scatter's reduction
//	ptx/handshake.ptx   the argument check beside the copy-engine paths and NCCL
//	ptx/lowlatency.ptx  the low-latency kernel for small messages (all three ops)
//	kernel_layout.go    parameter and region offsets the launch code writes
//
// The kernels are built from the same fragments (layout.go: the parameter
// block and signal region; fragments.go: parameter load, thread 0's setup,
// signal, wait with watchdog and trap; sum.go: the reduction), so the signalling protocol exists
// once. Registers cannot be indexed in PTX, so per-rank work is unrolled
// here, by loops over the ranks.
//
// Usage: ptxgen [-dir internal/backend/cuda]. The golden test (main_test.go)
// regenerates into memory and compares with the committed files.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	dir := flag.String("dir", ".", "the internal/backend/cuda directory to write into")
	flag.Parse()
	if err := write(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "ptxgen:", err)
		os.Exit(1)
	}
}

// outputs are the generated files, by path relative to internal/backend/cuda.
func outputs() (map[string][]byte, error) {
	goSrc, err := goLayout()
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"ptx/allgather.ptx":     []byte(allGather()),
		"ptx/allreduce.ptx":     []byte(allReduce()),
		"ptx/reducescatter.ptx": []byte(reduceScatterLC()),
		"ptx/handshake.ptx":     []byte(handshake()),
		"ptx/lowlatency.ptx":    []byte(lowLatency()),
		"kernel_layout.go":      goSrc,
	}, nil
}

func write(dir string) error {
	files, err := outputs()
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
