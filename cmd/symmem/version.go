package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version may be set at build time with -ldflags "-X main.Version=...";
// otherwise it is the module version Go recorded (vX.Y.Z after
// `go install github.com/symmem/symmem/cmd/symmem@vX.Y.Z`).
var Version = ""

// versionString is Version, else the module's version from the build info
// ("(devel)" in a local build), plus the VCS revision when recorded.
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
	return v + rev
}

func init() { commands["version"] = version }

func version(args []string) int {
	fmt.Printf("symmem %s (%s)\n", versionString(), runtime.Version())
	return 0
}
