package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedInStep: the header's generated blocks and the Python codes
// are what coll says now.
func TestGeneratedInStep(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of step with package coll: run go generate ./coll\n--- generated:\n%s", name, want)
		}
	}
}
