package main

import (
	"strings"
	"testing"
)

// --share-device reaches every rank as SYMMEM_SHARE_DEVICE=1 (what Init and
// the GPU backend read); without it the variable is not set.
func TestLaunchShareDevice(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--share-device", "-n", "2", "--no-prefix", "--", "sh", "-c", "echo share=${SYMMEM_SHARE_DEVICE:-unset}"}, "share=1"},
		{[]string{"launch", "-n", "2", "--no-prefix", "--", "sh", "-c", "echo share=${SYMMEM_SHARE_DEVICE:-unset}"}, "share=unset"},
	} {
		out, errs, err := cli(t, tc.args...)
		if err != nil {
			t.Fatalf("symmem %v: %v\n%s\n%s", tc.args, err, out, errs)
		}
		if got := strings.Count(out, tc.want); got != 2 {
			t.Errorf("symmem %v: %q printed by %d ranks, want 2:\n%s", tc.args, tc.want, got, out)
		}
	}
}

// TestLaunchLongLine: with --no-prefix a line longer than the launcher's
// 64 KiB read buffer comes out whole (a JSON document on one line); with
// the prefix it becomes several lines, each saying its rank.
func TestLaunchLongLine(t *testing.T) {
	const spew = `head -c 100000 /dev/zero | tr "\0" x; echo`
	out, errs, err := cli(t, "launch", "-n", "1", "--no-prefix", "--", "sh", "-c", spew)
	if err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if want := strings.Repeat("x", 100000) + "\n"; out != want {
		t.Errorf("--no-prefix: one 100000-byte line came out as %d lines, %d bytes", strings.Count(out, "\n"), len(out))
	}
	out, errs, err = cli(t, "launch", "-n", "1", "--", "sh", "-c", spew)
	if err != nil {
		t.Fatalf("%v: %s", err, errs)
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 2 || strings.Count(out, "x") != 100000 ||
		!strings.HasPrefix(lines[0], "[rank 0] x") || !strings.HasPrefix(lines[1], "[rank 0] x") {
		t.Errorf("prefixed: %d lines, %d x's; want 2 lines starting [rank 0], 100000 x's", len(lines), strings.Count(out, "x"))
	}
}
