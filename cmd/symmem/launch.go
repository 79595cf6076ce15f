package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/symmem/symmem/launch"
	"github.com/symmem/symmem/rendezvous"
)

func init() { commands["launch"] = launchCmd }

func launchCmd(args []string) int {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	n := fs.Int("n", 0, "number of local ranks to start (required)")
	timeout := fs.Duration("timeout", 0, "stop the whole job after this long (e.g. 10m); 0 = no limit")
	grace := fs.Duration("grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when stopping ranks")
	noPrefix := fs.Bool("no-prefix", false, `do not prefix output lines with "[rank r] "`)
	share := fs.Bool("share-device", false, "let ranks share a GPU (sets SYMMEM_SHARE_DEVICE=1): symmem's own GPU paths run several ranks on one GPU; NCCL is off for them")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: symmem launch -n N [flags] [--] prog args...

Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT (torchrun-compatible), SYMMEM_TOKEN, SYMMEM_JOB_ID and
SYMMEM_STORE_HOSTED=1 (the launcher hosts the rendezvous store). If a rank fails the
others are stopped and symmem exits with that rank's status.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if *n < 1 || len(rest) == 0 {
		fmt.Fprintln(os.Stderr, "symmem launch: need -n N (N >= 1) and a program to run")
		fs.Usage()
		return 2
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var env []string
	if *share {
		env = append(env, rendezvous.VarShareDevice+"=1")
	}
	code, err := launch.Run(context.Background(), launch.Config{
		N: *n, Prog: rest[0], Args: rest[1:], Env: env,
		Timeout: *timeout, Grace: *grace, NoPrefix: *noPrefix, Signals: sigs,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "symmem %v\n", err)
	}
	return code
}
