// Command symmem launches ranks, benchmarks collectives and diagnoses the
// symmetric-memory setup of a machine.
//
//	symmem launch --nproc-per-node N [--] prog args...   start N local ranks
//	symmem bench [flags]                                 sweep collectives, nccl-tests output
//	symmem bench overlap [flags]                         collectives beside GEMMs: how much hides (GPU)
//	symmem tune -o FILE [flags]                          measure every path, write the table auto reads
//	symmem doctor                                        backend, ranks, pool, chosen paths
//	symmem version
//	symmem completion bash|zsh|fish|powershell
//
// Exit status: 0 on success and for help, 2 for a usage error, otherwise the
// command's own status (a failed rank's, or 1).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/symmem/symmem/launch"
)

func main() { os.Exit(execute(os.Args[1:])) }

// cliArgs are the arguments of this invocation (after the program name).
var cliArgs []string

// subArgs are the arguments after the subcommand's name, as typed: ranks
// started by bench and doctor re-run the subcommand with them.
func subArgs() []string {
	if len(cliArgs) == 0 {
		return nil
	}
	return cliArgs[1:]
}

// exitError carries a command's exit status; its message, if any, was
// already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitWith turns a command's status into RunE's error.
func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return exitError{code}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "symmem",
		Short:         "collectives on symmetric memory: launch ranks, benchmark, diagnose",
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(os.Stderr)
			cmd.Usage()
			return errors.New("no command given")
		},
	}
	root.SetVersionTemplate("symmem {{.Version}}\n")
	root.AddCommand(newLaunchCmd(), newBenchCmd(), newTuneCmd(), newDoctorCmd(), newVersionCmd())
	strictHelpAndCompletion(root)
	return root
}

// strictHelpAndCompletion makes an unknown help topic or completion shell a
// usage error (exit 2): cobra's own commands print help and exit 0.
func strictHelpAndCompletion(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			show := c.Run
			c.Run = nil
			c.RunE = func(c *cobra.Command, args []string) error {
				if sub, rest, err := c.Root().Find(args); sub == nil || err != nil || len(rest) > 0 {
					return fmt.Errorf("unknown help topic %q: want a command ('symmem -h' lists them)", strings.Join(args, " "))
				}
				show(c, args)
				return nil
			}
		case "completion":
			var shells []string
			for _, s := range c.Commands() {
				shells = append(shells, s.Name())
			}
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(c *cobra.Command, args []string) error {
				if len(args) > 0 {
					return fmt.Errorf("unknown shell %q: want one of %s", args[0], strings.Join(shells, ", "))
				}
				c.SetOut(os.Stderr)
				c.Usage()
				return fmt.Errorf("no shell given: want one of %s", strings.Join(shells, ", "))
			}
		}
	}
}

// checkRanks checks --nproc-per-node here, by that name: launch.Run's own
// message says -n, which is the iteration count in bench and tune.
func checkRanks(n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("--nproc-per-node %d: need at least 1 rank", n)
	case n > launch.MaxRanks:
		return fmt.Errorf("--nproc-per-node %d: at most %d local ranks", n, launch.MaxRanks)
	}
	return nil
}

func execute(args []string) int {
	cliArgs = args
	root := newRootCmd()
	if len(args) > 0 {
		if sub, _, err := root.Find(args[:1]); err == nil && sub != root {
			n := 1 // words naming the command: "bench", or "bench overlap"
			if len(args) > 1 {
				for _, c := range sub.Commands() {
					if c.Name() == args[1] {
						sub, n = c, 2
					}
				}
			}
			args = append(args[:n:n], compatArgs(sub.Flags(), args[n:], sub.Flags().HasFlags() && sub.Name() != "launch")...)
		}
	}
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	name := "symmem"
	if len(args) > 0 {
		if sub, _, ferr := root.Find(args[:1]); ferr == nil && sub != root {
			name += " " + sub.Name()
			if len(args) > 1 {
				for _, c := range sub.Commands() {
					if c.Name() == args[1] {
						name += " " + c.Name()
					}
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
	return 2
}

// noArgs refuses positional arguments with a message naming the first.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (flags only)", args[0])
	}
	return nil
}

// normalizeFlag accepts torchrun's underscores (--nproc_per_node).
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
}

// compatArgs rewrites the single-dash long flags of earlier symmem versions
// (-ops, -backend, -iters=5) to pflag's double dash, leaving nccl-tests'
// one-letter flags, values and everything after "--" alone. With
// interspersed false it stops at the first positional argument (launch:
// the program and its own flags follow).
func compatArgs(fs *pflag.FlagSet, args []string, interspersed bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if !interspersed {
				return append(out, args[i:]...)
			}
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var fl *pflag.Flag
		if len(name) > 1 {
			fl = fs.Lookup(string(normalizeFlag(fs, name)))
			if fl != nil && !strings.HasPrefix(a, "--") {
				a = "-" + a
			}
		} else if len(name) == 1 {
			fl = fs.ShorthandLookup(name)
		}
		out = append(out, a)
		// A flag that takes a value and was not given one with "=" takes
		// the next argument.
		if fl != nil && !hasValue && fl.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}
