package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/symmem/symmem/launch"
	"github.com/symmem/symmem/rendezvous"
)

// forwardedSignals are the signals the launcher passes on to every rank
// (torchrun's set). Left to their default action, SIGHUP (a closed terminal
// or ssh session) and SIGQUIT killed the launcher alone: the ranks died of
// Pdeathsig, but the processes they had started kept running.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

func newLaunchCmd() *cobra.Command {
	var o struct {
		n, masterPort, hosts int
		timeout, grace       time.Duration
		noPrefix, share      bool
	}
	cmd := &cobra.Command{
		Use:   "launch --nproc-per-node N [flags] [--] prog args...",
		Short: "start N local ranks of prog (torchrun's environment)",
		Long: `Starts N local ranks of prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT as torchrun sets them (MASTER_PORT is left free, so a
torch program can call init_process_group("env://")), plus SYMMEM_STORE (symmem's
rendezvous store, hosted by the launcher on a port of its own), SYMMEM_TOKEN and
SYMMEM_JOB_ID. If a rank fails the others are stopped and symmem exits with that
rank's status.`,
		RunE: func(cmd *cobra.Command, rest []string) error {
			if o.n < 1 || len(rest) == 0 {
				return errors.New("need --nproc-per-node N (N >= 1) and a program to run")
			}
			if err := checkRanks(o.n); err != nil {
				return err
			}
			if o.timeout < 0 {
				return fmt.Errorf("--timeout %v: must not be negative (0: no limit)", o.timeout)
			}
			// launch.Config reads a zero Grace as DefaultGrace: 0 would
			// quietly mean 5s.
			if o.grace <= 0 {
				return fmt.Errorf("--grace %v: must be positive, e.g. 100ms (the time a rank gets between SIGTERM and SIGKILL)", o.grace)
			}
			if o.masterPort < 0 || o.masterPort > 65535 {
				return fmt.Errorf("--master-port %d: want 1..65535 (0: a free port)", o.masterPort)
			}
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, forwardedSignals...)
			defer signal.Stop(sigs)
			var env []string
			if o.share {
				env = append(env, rendezvous.VarShareDevice+"=1")
			}
			code, err := launch.Run(context.Background(), launch.Config{
				N: o.n, Hosts: o.hosts, Prog: rest[0], Args: rest[1:], MasterPort: o.masterPort, Env: env,
				Timeout: o.timeout, Grace: o.grace, NoPrefix: o.noPrefix, Signals: sigs,
			})
			if err != nil {
				fmt.Fprintf(os.Stderr, "symmem %v\n", err)
			}
			return exitWith(code)
		},
	}
	fs := cmd.Flags()
	fs.SetInterspersed(false) // the program's own flags follow it
	fs.SetNormalizeFunc(normalizeFlag)
	fs.IntVarP(&o.n, "nproc-per-node", "n", 0, "number of local ranks to start (required), as torchrun spells it")
	fs.IntVar(&o.masterPort, "master-port", 0, "MASTER_PORT the ranks see, left free for torch's init_process_group (0: a free port)")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop the whole job after this long (e.g. 10m); 0 = no limit")
	fs.DurationVar(&o.grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when stopping ranks (positive)")
	fs.BoolVar(&o.noPrefix, "no-prefix", false, `do not prefix output lines with "[rank r] "`)
	fs.IntVar(&o.hosts, "hosts", 0, "act as this many hosts on this machine (testing multi-host groups): consecutive ranks per host, each host with its own SYMMEM_HOST and NCCL_HOSTID, local ranks and block of CUDA_VISIBLE_DEVICES (with fewer than N listed but N/H or more, every host gets the first N/H)")
	fs.BoolVar(&o.share, "share-device", false, "let ranks share a GPU (sets SYMMEM_SHARE_DEVICE=1): symmem's own GPU paths run several ranks on one GPU; NCCL is off for them")
	return cmd
}
