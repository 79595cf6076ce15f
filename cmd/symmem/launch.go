package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/symmem/symmem/launch"
)

func init() { commands["launch"] = launchCmd }

func launchCmd(args []string) int {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	var n int
	intAlias(fs, &n, 0, "number of local ranks to start (required); torchrun's spelling", "nproc-per-node", "nproc_per_node", "n")
	masterPort := fs.Int("master-port", 0, "MASTER_PORT the ranks see, left free for torch's init_process_group (0: a free port)")
	timeout := fs.Duration("timeout", 0, "stop the whole job after this long (e.g. 10m); 0 = no limit")
	grace := fs.Duration("grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when stopping ranks")
	noPrefix := fs.Bool("no-prefix", false, `do not prefix output lines with "[rank r] "`)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: symmem launch --nproc-per-node N [flags] [--] prog args...

Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT as torchrun sets them (MASTER_PORT is left free, so a
torch program can call init_process_group("env://")), plus SYMMEM_STORE (symmem's
rendezvous store, hosted by the launcher on a port of its own), SYMMEM_TOKEN and
SYMMEM_JOB_ID. If a rank fails the others are stopped and symmem exits with that
rank's status.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(err)
	}
	rest := fs.Args()
	if n < 1 || len(rest) == 0 {
		fmt.Fprintln(os.Stderr, "symmem launch: need --nproc-per-node N (N >= 1) and a program to run")
		fs.Usage()
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	code, err := launch.Run(context.Background(), launch.Config{
		N: n, Prog: rest[0], Args: rest[1:], MasterPort: *masterPort,
		Timeout: *timeout, Grace: *grace, NoPrefix: *noPrefix, Signals: sigs,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "symmem %v\n", err)
	}
	return code
}
