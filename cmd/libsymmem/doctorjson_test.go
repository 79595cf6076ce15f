package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/symmem/symmem/doctor"
)

// TestDoctorJSONGraphRows: symmem_doctor's auto_table (python's
// symmem.doctor()) carries graph_rows, as `symmem doctor` prints "N rows
// for calls captured into CUDA graphs" (the key was missing; found by
// review).
func TestDoctorJSONGraphRows(t *testing.T) {
	a := doctor.AutoTable{Source: "/tmp/t.json", From: "SYMMEM_AUTO_TABLE", GraphRows: 7,
		Builtin: &doctor.AutoTable{Source: "built-in", GraphRows: 12}}
	b, err := json.Marshal(toAutoTableJSON(a))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "graph_rows") {
		t.Errorf("auto_table JSON has no graph_rows (the table has 7, its built-in 12): %s", b)
	}
}
