// Command symmem launches ranks, benchmarks collectives and diagnoses the
// symmetric-memory setup of a machine.
//
//	symmem launch --nproc-per-node N [--] prog args...   start N local ranks
//	symmem bench [flags]                   sweep collectives, nccl-tests columns
//	symmem doctor                          backend, ranks, pool, chosen paths
//	symmem version
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// commands maps a subcommand to its entry point; each lives in its own file.
var commands = map[string]func(args []string) int{}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "-help", "--help", "help":
		usage()
		os.Exit(0)
	case "-version", "--version":
		os.Exit(version(nil))
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "symmem: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(run(os.Args[2:]))
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: symmem <command> [flags]

commands:
  launch --nproc-per-node N [--] prog args...
                                  start N local ranks of prog (torchrun's environment)
  bench [flags]                   benchmark collectives (CPU backend when no GPU)
  doctor                          show backend, ranks, groups, pool and chosen paths
  version                         print the version

Run 'symmem <command> -h' for a command's flags; 'symmem --version' for the version.
Help exits 0, a usage error 2.
`)
}

// exitCode maps a flag parsing error to the exit status: 0 for -h, 2 else.
func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
