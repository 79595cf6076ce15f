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
