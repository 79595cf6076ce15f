package symmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symmem/symmem/rendezvous"
)

// TestAutoTableFile: the option wins over SYMMEM_AUTO_TABLE; the CPU
// backend reads no table and says a named one is ignored.
func TestAutoTableFile(t *testing.T) {
	env := rendezvous.Env{WorldSize: 1, LocalWorldSize: 1, AutoTable: "/env/table.json"}
	if p, from := autoTableFile(Options{}, env); p != "/env/table.json" || from != "SYMMEM_AUTO_TABLE" {
		t.Errorf("env only: %q from %q", p, from)
	}
	if p, from := autoTableFile(Options{GPU: GPUOptions{AutoTable: "/opt.json"}}, env); p != "/opt.json" || from != "Options.GPU.AutoTable" {
		t.Errorf("option and env: %q from %q", p, from)
	}
	if p, _ := autoTableFile(Options{}, rendezvous.Env{}); p != "" {
		t.Errorf("neither: %q", p)
	}
	be, _, auto, m, err := newBackend("cpu", env, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if auto.Source != "" || !strings.Contains(auto.Note, "SYMMEM_AUTO_TABLE=/env/table.json ignored") || m.Backend != "cpu" {
		t.Errorf("cpu: %+v, machine %+v", auto, m)
	}
	// The same note where auto fell back to the CPU backend (cpuAutoTable
	// serves both routes); nothing named, nothing ignored.
	if a := cpuAutoTable("", ""); a.Source != "" || strings.Contains(a.Note, "ignored") || !strings.Contains(a.Note, "reads no table") {
		t.Errorf("cpu, no table named: %+v", a)
	}
}

func TestLoadAutoTable(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"format": 1, "machine": {"backend": "cuda", "gpu": "X"}, "date": "2026-12-01", "command": "symmem tune",
		"rows": [{"op": "all_reduce", "dtype": "any", "ranks": "2-", "placement": "any", "algo": "nccl"}]}`), 0o644)
	if tb, err := loadAutoTable(good); err != nil || len(tb.Rows) != 1 {
		t.Fatalf("good table: %v", err)
	}
	for name, c := range map[string]struct{ data, want string }{
		"missing":  {"", "no such file"},
		"format":   {`{"format": 7, "rows": []}`, "format version 7"},
		"bad row":  {`{"format": 1, "rows": [{"op": "all_reduce", "dtype": "any", "ranks": "2", "placement": "any", "up_to": 5, "algo": "nccl"}, {"op": "all_reduce", "dtype": "any", "ranks": "2", "placement": "any", "up_to": 4, "algo": "nccl"}]}`, "row 1"},
		"not json": {`hello`, "invalid character"},
	} {
		p := filepath.Join(dir, name+".json")
		if c.data != "" {
			os.WriteFile(p, []byte(c.data), 0o644)
		}
		_, err := loadAutoTable(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want an ErrInvalid containing %q", name, err, c.want)
		}
	}
}
