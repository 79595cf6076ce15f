// Command gen writes auto's built-in table as Go source from the
// measurement files in a directory (go generate runs it for
// internal/backend/cuda):
//
//	go run ./internal/tune/gen -dir results/auto -pkg cuda -var builtinTable -o internal/backend/cuda/autotable_builtin.go
//
// Every *.json in -dir is an input: a `symmem bench -J` report (`symmem
// tune` writes one per dtype beside its table) or an auto table used as a
// seed where nothing is measured. The rule (tune.Build): per op, dtype
// class (16-bit float, 32-bit float, other), rank count (2, 3-4, 5-8, ...),
// placement and size, the fastest path measured; within 3% of it the
// previous size's winner, else tune.Preference (coll's tie order); refused and wrong calls never win; consecutive sizes with one
// winner merge into size ranges, the last unbounded.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/symmem/symmem/internal/tune"
)

func main() {
	dir := flag.String("dir", "", "directory of the input *.json files")
	pkg := flag.String("pkg", "cuda", "package of the generated file")
	name := flag.String("var", "builtinTable", "variable to declare")
	out := flag.String("o", "", "file to write (default: stdout)")
	flag.Parse()
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gen -dir DIR [-pkg cuda] [-var builtinTable] [-o FILE]")
		os.Exit(2)
	}
	src, err := tune.Generate(*dir, *pkg, *name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if *out == "" {
		os.Stdout.Write(src)
		return
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
