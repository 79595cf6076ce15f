package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func init() { commands["version"] = version }

func version(args []string) int {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	fmt.Printf("symmem %s%s (%s)\n", Version, rev, runtime.Version())
	return 0
}
