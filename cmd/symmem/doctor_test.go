package main

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/doctor"
)

// TestWriteAutoTable: doctor says which table auto reads: the built-in one
// with its sources, or a file with what named it, its machine and command,
// and the built-in one behind it.
func TestWriteAutoTable(t *testing.T) {
	builtin := doctor.AutoTable{Source: "built-in", Sources: []string{"results/auto/a.json"}, Date: "2026-11-21",
		Machine: doctor.Machine{Backend: "cuda", GPU: "NVIDIA H200", Count: 4, Link: "nvlink", NCCL: "2.28.9"}, Note: "transcribed"}
	here := doctor.Machine{Backend: "cuda", GPU: "NVIDIA H100", Count: 2, Link: "nvlink", Driver: "12.8", NCCL: "2.28.9"}
	var b strings.Builder
	writeAutoTable(&b, doctor.Report{Machine: here, AutoTable: builtin})
	want := `machine:  2x NVIDIA H100, nvlink, driver 12.8, NCCL 2.28.9 (as auto tables record it)
auto:     built-in table, measured on 4x NVIDIA H200, nvlink, NCCL 2.28.9, 2026-11-21 (from results/auto/a.json)
          note: transcribed
`
	if b.String() != want {
		t.Errorf("built-in:\n%s\nwant:\n%s", b.String(), want)
	}
	file := doctor.AutoTable{Source: "/t/h100.json", From: "SYMMEM_AUTO_TABLE", Machine: here, Date: "2026-12-01T10:00:00Z",
		Command: "symmem tune -o /t/h100.json", Sources: []string{"h100.bfloat16.bench.json"}, Builtin: &builtin, GraphRows: 7}
	b.Reset()
	writeAutoTable(&b, doctor.Report{Machine: here, AutoTable: file})
	for _, w := range []string{
		"auto:     table /t/h100.json (SYMMEM_AUTO_TABLE), measured on 2x NVIDIA H100, nvlink, driver 12.8, NCCL 2.28.9, 2026-12-01T10:00:00Z (from h100.bfloat16.bench.json); 7 rows for calls captured into CUDA graphs\n",
		"          made by: symmem tune -o /t/h100.json\n",
		"          where it has no row: the built-in table, measured on 4x NVIDIA H200",
	} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("file table lacks %q:\n%s", w, b.String())
		}
	}
}
