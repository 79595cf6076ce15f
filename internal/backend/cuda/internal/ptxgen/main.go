// Command ptxgen writes symmem's kernels and the Go constants that describe
// their parameter blocks, from one description (run by `go generate` in
// internal/backend/cuda): ptx/NAME.ptx from NAME.go here, which registers
// it, and kernel_layout.go, the parameter and region offsets the launch
// code writes.
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

// generators write the generated files, by path relative to
// internal/backend/cuda: each kernel's file registers its own (a new kernel
// adds a file here, no line elsewhere).
var generators = map[string]func() ([]byte, error){}

// register adds the generator of file name.
func register(name string, gen func() string) {
	generators[name] = func() ([]byte, error) { return []byte(gen()), nil }
}

func init() { generators["kernel_layout.go"] = goLayout }

// outputs are the generated files, by path relative to internal/backend/cuda.
func outputs() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, gen := range generators {
		b, err := gen()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files[name] = b
	}
	return files, nil
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
