package cuda

import (
	"os"
	"strings"
	"testing"
)

// TestSpanHostsRuntimeConnect: a job whose groups span hosts connects NCCL
// communicators at creation (NCCL_RUNTIME_CONNECT=0) unless the user chose,
// or NCCL already read its default; the status says which.
func TestSpanHostsRuntimeConnect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		user      string // "" = unset
		created   bool
		wantEnv   string // "" = unset afterwards
		wantWords string
	}{
		{name: "unset", wantEnv: "0", wantWords: "=0 set by symmem"},
		{name: "user 1 kept", user: "1", wantEnv: "1", wantWords: "set by the user, kept: a rank that exits"},
		{name: "user 0 kept", user: "0", wantEnv: "0", wantWords: "=0 (set by the user, kept)"},
		{name: "too late", created: true, wantWords: "a communicator existed before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envRuntimeConnect, tc.user) // restored after the test
			if tc.user == "" {
				os.Unsetenv(envRuntimeConnect)
			}
			s := &ncclState{created: tc.created}
			s.spanHosts()
			s.spanHosts() // decided once
			got, set := os.LookupEnv(envRuntimeConnect)
			if want := tc.wantEnv != ""; set != want || got != tc.wantEnv {
				t.Errorf("%s = %q (set %v), want %q", envRuntimeConnect, got, set, tc.wantEnv)
			}
			if !strings.Contains(s.connect, tc.wantWords) {
				t.Errorf("status %q does not say %q", s.connect, tc.wantWords)
			}
		})
	}
}
