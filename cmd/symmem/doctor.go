package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/symmem/symmem"
	"github.com/symmem/symmem/bench"
	"github.com/symmem/symmem/doctor"
	"github.com/symmem/symmem/internal/tune"
)

func newDoctorCmd() *cobra.Command {
	var n int
	var backend string
	var all bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "show backend, ranks, groups, pool and the path each op would take",
		Long: `Shows the backend, ranks, groups and pool state of a job, and which path each op
would take at a few sizes for symmetric and ordinary buffers, and why. Outside a
launched job it starts --nproc-per-node local ranks of itself.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			switch strings.ToLower(backend) {
			case "auto", "cpu", "cuda":
			default:
				return fmt.Errorf("--backend %q: want auto, cpu or cuda", backend)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %v: must be positive (it bounds every wait)", timeout)
			}
			if err := checkRanks(n); err != nil {
				return err
			}
			return exitWith(doctorCmd(n, backend, all, timeout, subArgs()))
		},
	}
	fs := cmd.Flags()
	fs.SetNormalizeFunc(normalizeFlag)
	fs.IntVarP(&n, "nproc-per-node", "n", 2, "ranks to start when not already inside a launched job (RANK unset)")
	fs.StringVar(&backend, "backend", "auto", "backend: auto, cpu or cuda")
	fs.BoolVar(&all, "all", false, `print every rank's report, each line prefixed "[rank r] " (default: rank 0 only)`)
	fs.DurationVar(&timeout, "timeout", symmem.DefaultTimeout, "bound on every wait")
	return cmd
}

// doctorCmd runs doctor with checked flags: it starts the ranks, or is one.
func doctorCmd(nRanks int, backendName string, allRanks bool, timeoutD time.Duration, args []string) int {
	n, backend, all, timeout := &nRanks, &backendName, &allRanks, &timeoutD
	if os.Getenv("RANK") == "" {
		return selfLaunch("doctor", *n, args)
	}
	w, err := symmem.Init(context.Background(), symmem.Options{Backend: *backend, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "symmem doctor (rank %s): %v\n", os.Getenv("RANK"), err)
		return 1
	}
	defer w.Close()
	if w.Rank() == 0 || *all {
		var b strings.Builder
		writeDoctor(&b, w.Doctor())
		emit(w.Rank(), *all, b.String())
	}
	return 0
}

// emit writes a rank's report in one Write; with prefix every line starts
// with "[rank r] " so several ranks' reports can be told apart.
func emit(rank int, prefix bool, report string) {
	if prefix {
		p := fmt.Sprintf("[rank %d] ", rank)
		report = p + strings.ReplaceAll(strings.TrimSuffix(report, "\n"), "\n", "\n"+p) + "\n"
	}
	os.Stdout.WriteString(report)
}

// writeDoctor prints a doctor report.
func writeDoctor(out io.Writer, r doctor.Report) {
	fmt.Fprintf(out, "symmem doctor: rank %d of %d (local %d of %d), job %s\n", r.Rank, r.Size, r.LocalRank, r.LocalSize, r.JobID)
	fmt.Fprintf(out, "backend:  %s (%s)\n", r.Backend, r.Why)
	fmt.Fprintf(out, "host:     %s\n", hostInfo())
	fmt.Fprintf(out, "timeout:  %v per wait; checked mode %v; staging buffer %s per group\n", r.Timeout, r.Checked, bench.FormatSize(r.Staging))
	p := r.Pool
	fmt.Fprintf(out, "pool:     %d segments, %s reserved, %s in use (peak %s), %d live blocks, %s pending\n",
		p.Segments, bench.FormatSize(p.Reserved), bench.FormatSize(p.InUse), bench.FormatSize(p.Peak), p.LiveBlocks, bench.FormatSize(p.Pending))
	for _, g := range p.Groups {
		fmt.Fprintf(out, "          group %q (id %d): %d segments registered, %s\n", g.Name, g.ID, g.Registered, bench.FormatSize(g.RegisteredBytes))
	}
	fmt.Fprintf(out, "groups:\n")
	for _, g := range r.Groups {
		role := fmt.Sprintf("member, group rank %d", g.Rank)
		if !g.Member {
			role = "not a member"
		}
		fmt.Fprintf(out, "  %-10s ranks %v (%s)\n", g.Name, g.Ranks, role)
	}
	if r.Detail != "" {
		fmt.Fprint(out, r.Detail)
	}
	writeAutoTable(out, r)
	fmt.Fprintf(out, "paths on the world group (what a call would do, and why):\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  op\tsize\tbuffers\tpath\twhy\n")
	for _, pr := range r.Paths {
		mem := "symmetric"
		if !pr.Symmetric {
			mem = "ordinary"
		}
		path := string(pr.Path.Algo)
		if pr.Path.Staged {
			path += "+staged"
		}
		fmt.Fprintf(tw, "  %v\t%s\t%s\t%s\t%s\n", pr.Kind, bench.FormatSize(pr.Bytes), mem, path, pr.Path.Reason)
	}
	tw.Flush()
}

// writeAutoTable says which table auto reads and where it came from.
func writeAutoTable(out io.Writer, r doctor.Report) {
	if m := r.Machine; m.GPU != "" {
		fmt.Fprintf(out, "machine:  %s (as auto tables record it)\n", tune.Machine(m).String())
	}
	a := r.AutoTable
	switch a.Source {
	case "":
		fmt.Fprintf(out, "auto:     no table: %s\n", a.Note)
		return
	case "built-in":
		fmt.Fprintf(out, "auto:     built-in table, %s\n", describeTable(a))
	default:
		fmt.Fprintf(out, "auto:     table %s (%s), %s\n", a.Source, a.From, describeTable(a))
		if a.Command != "" {
			fmt.Fprintf(out, "          made by: %s\n", a.Command)
		}
		if b := a.Builtin; b != nil {
			fmt.Fprintf(out, "          where it has no row: the built-in table, %s\n", describeTable(*b))
		}
	}
	if a.Note != "" {
		fmt.Fprintf(out, "          note: %s\n", a.Note)
	}
}

// describeTable is where a table was measured, when, and from what.
func describeTable(a doctor.AutoTable) string {
	s := fmt.Sprintf("measured on %s, %s", tune.Machine(a.Machine).String(), a.Date)
	if len(a.Sources) > 0 {
		s += " (from " + strings.Join(a.Sources, ", ") + ")"
	}
	if a.GraphRows > 0 {
		s += fmt.Sprintf("; %d rows for calls captured into CUDA graphs", a.GraphRows)
	}
	return s
}
