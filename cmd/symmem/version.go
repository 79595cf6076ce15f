package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version may be set at build time with -ldflags "-X main.Version=...";
// otherwise it is the module version Go recorded (vX.Y.Z after
// `go install github.com/symmem/symmem/cmd/symmem@vX.Y.Z`).
var Version = ""

// versionString is Version, else the module's version from the build info
// ("(devel)" in a local build), plus the VCS revision when recorded and the
// Go version.
func versionString() string {
	v, rev := Version, ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	return fmt.Sprintf("%s%s (%s)", v, rev, runtime.Version())
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  noArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Printf("symmem %s\n", versionString())
		},
	}
}
