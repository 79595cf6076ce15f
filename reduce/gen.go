//go:build ignore

// gen writes kernels_amd64.s from reduce/internal/asmgen: go generate ./reduce
package main

import (
	"log"
	"os"

	"github.com/symmem/symmem/reduce/internal/asmgen"
)

func main() {
	if err := os.WriteFile("kernels_amd64.s", asmgen.AMD64(), 0o644); err != nil {
		log.Fatal(err)
	}
}
