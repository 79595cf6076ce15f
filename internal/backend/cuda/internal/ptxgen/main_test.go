package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestFragmentsShared: the signalling protocol and the reduction exist
// once. The signalling kernels wait exactly twice (ready with the peer's
// launch header, done; the handshake: ready, and on a mismatch the peer's
// word that it reported too), the lc reduction once (arrived), the
// low-latency kernel once for the row headers and once per rank (its
// lines);
// each wait traps on the watchdog, every kernel starts with the same
// parameter load and the reductions sum alike; only the handshake
// stops the context on a mismatch (the others skip their work).
func TestFragmentsShared(t *testing.T) {
	var load ptx
	load.loadParams()
	for name, k := range map[string]struct {
		src       string
		waits     int
		reduction bool
	}{"allgather": {allGather(), 2, false}, "allreduce": {allReduce(), 2, true}, "reducescatter": {reduceScatterLC(), 1, true},
		"handshake": {handshake(), 2, false}, "lowlatency": {lowLatency(), 1 + maxRanks, true}, "alltoall": {allToAll(), 2, false}} {
		src := k.src
		if c := bytes.Count([]byte(src), []byte("@%p6 trap;")); c != k.waits {
			t.Errorf("%s: %d watchdog traps, want %d", name, c, k.waits)
		}
		// The kernels whose waits only symmem's own signals end also end
		// them when the call gate fails (P.stop); the handshake and lc sit
		// beside work that only a trap stops.
		polls := 0
		if name == "allgather" || name == "allreduce" || name == "lowlatency" || name == "alltoall" {
			polls = k.waits
		}
		if c := bytes.Count([]byte(src), []byte(fmt.Sprintf("[P+%d];", pStop))); c != polls {
			t.Errorf("%s: %d waits read P.stop, want %d", name, c, polls)
		}
		// The signalling kernels also acquire the peer's launch header;
		// the low-latency kernel acquires nothing: data and flag come in
		// one load.
		acquires := k.waits
		switch name {
		case "reducescatter":
		case "lowlatency":
			acquires = 0
		default:
			acquires++
		}
		if c := bytes.Count([]byte(src), []byte("ld.acquire.sys.global.u32")); c != acquires {
			t.Errorf("%s: %d acquire loads, want %d", name, c, acquires)
		}
		var bf, f16 ptx
		bf.bf16Pack()
		f16.f16Pack()
		if k.reduction && (!bytes.Contains([]byte(src), []byte(bf.b.String())) || !bytes.Contains([]byte(src), []byte(f16.b.String()))) {
			t.Errorf("%s does not round with the shared fragments", name)
		}
		if !bytes.Contains([]byte(src), []byte(load.b.String())) {
			t.Errorf("%s does not start with the shared parameter load", name)
		}
		mismatchTrap := bytes.Contains([]byte(src), []byte("membar.sys;\n\ttrap;"))
		if mismatchTrap != (name == "handshake") {
			t.Errorf("%s: stops the context on a mismatch: %v", name, mismatchTrap)
		}
		if !bytes.HasPrefix([]byte(src), []byte("// "+generatedLine+"\n")) {
			t.Errorf("%s lacks the generated-code line", name)
		}
	}
}

// TestASCII: ptxas rejects a PTX file with any non-ASCII byte (a dash in a
// comment made every module fail to load on the GPU, run 34).
func TestASCII(t *testing.T) {
	files, err := outputs()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		for i, c := range b {
			if c > 0x7f {
				t.Errorf("%s: byte %d is not ASCII (%#x)", name, i, c)
				break
			}
		}
	}
}

// TestPTXAssembles runs NVIDIA's ptxas on every kernel, for sm_70 and
// sm_90, where one is at hand (SYMMEM_PTXAS, else ptxas on PATH; no GPU
// needed: e.g. Debian's nvidia-cuda-toolkit has it), so a syntax or type
// error shows before a GPU run; it also fails on register spills in the
// kernels that had none. Skipped without ptxas.
func TestPTXAssembles(t *testing.T) {
	bin := os.Getenv("SYMMEM_PTXAS")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("ptxas"); err != nil {
			t.Skip("no ptxas (set SYMMEM_PTXAS)")
		}
	}
	files, err := outputs()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, src := range files {
		if !strings.HasSuffix(name, ".ptx") {
			continue
		}
		in := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(in, src, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arch := range []string{"sm_70", "sm_90"} {
			out, err := exec.Command(bin, "-arch="+arch, "-v", in, "-o", filepath.Join(dir, "out.cubin")).CombinedOutput()
			if err != nil {
				t.Fatalf("ptxas %s %s: %v\n%s", arch, name, err, out)
			}
			// The lc kernel spills already (8 vectors in flight per thread
			// under .maxntid 512); the others must not.
			if !strings.Contains(name, "reducescatter") && !strings.Contains(string(out), " 0 bytes spill stores") {
				t.Errorf("ptxas %s %s spills:\n%s", arch, name, out)
			}
		}
	}
}
