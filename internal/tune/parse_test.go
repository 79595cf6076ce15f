package tune

import (
	"strings"
	"testing"
)

// TestRowUnknownFieldRefused: a user's table (symmem tune -o, edited by
// hand, loaded through SYMMEM_AUTO_TABLE / Options.GPU.AutoTable) refuses
// a misspelt key inside a row as it does at the top level (it was dropped
// silently and the row meant something else; found by review).
func TestRowUnknownFieldRefused(t *testing.T) {
	for name, js := range map[string]string{
		// "placment": the row silently becomes placement any.
		"placement typo": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placment":"in","algo":"ll"}]}`,
		// "upto": the bound is lost, the row covers every size.
		"up_to typo": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","upto":4096,"algo":"ll"}]}`,
		// "dtpye": the 16-bit-float row silently covers every dtype.
		"dtype typo": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtpye":"16-bit-float","ranks":"2","placement":"any","algo":"ll"}]}`,
	} {
		if tb, err := Parse([]byte(js)); err == nil {
			t.Errorf("%s: accepted; rows read as %v", name, tb.Rows)
		}
	}
}

// TestTrailingDataRefused: anything after the table's JSON value is refused
// (Parse read the first value and ignored the rest; found by review).
func TestTrailingDataRefused(t *testing.T) {
	js := `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
		{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"nccl"}]}
		{"format": 1, "rows": [{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"kernel"}]} garbage`
	if tb, err := Parse([]byte(js)); err == nil {
		t.Errorf("a file with trailing data was accepted (rows %v)", tb.Rows)
	}
}

// TestDuplicateKeyRefused: a key given twice in one object is refused
// (encoding/json kept the last silently: a second "rows" dropped the
// first list, a second "up_to" or "algo" changed the row).
func TestDuplicateKeyRefused(t *testing.T) {
	for name, js := range map[string]string{
		"rows twice": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","up_to":4096,"algo":"ll"}],
			"rows": [{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"nccl"}]}`,
		"up_to twice": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","up_to":4096,"up_to":0,"algo":"ll"}]}`,
		"algo in two cases": `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"ll","Algo":"nccl"}]}`,
		"gpu twice": `{"format": 1, "machine": {"backend": "cuda", "gpu": "NVIDIA H100", "gpu": "NVIDIA H200"}, "rows": [
			{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"nccl"}]}`,
	} {
		if tb, err := Parse([]byte(js)); err == nil || !strings.Contains(err.Error(), "twice in one object") {
			var rows []Row
			if tb != nil {
				rows = tb.Rows
			}
			t.Errorf("%s: %v; rows read as %v", name, err, rows)
		}
	}
	// The same key in two objects is no duplicate.
	ok := `{"format": 1, "machine": {"backend": "cuda"}, "rows": [
		{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","up_to":4096,"algo":"ll"},
		{"op":"all_reduce","dtype":"any","ranks":"2","placement":"any","algo":"nccl"}]}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Errorf("a valid table: %v", err)
	}
}
