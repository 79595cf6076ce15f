package members

import "testing"

// A group created again gets a new generation (and so a new namespace),
// also across backends of one process; other names, kinds and jobs count
// on their own.
func TestGeneration(t *testing.T) {
	for i, want := range []int{0, 1, 2} {
		if got := Generation("cpu", "job1", "tp0"); got != want {
			t.Fatalf("call %d: generation %d, want %d", i, got, want)
		}
	}
	if g := Generation("cuda", "job1", "tp0"); g != 0 {
		t.Errorf("another backend kind: %d, want 0", g)
	}
	if g := Generation("cpu", "job2", "tp0"); g != 0 {
		t.Errorf("another job: %d, want 0", g)
	}
	if a, b := Prefix("cpu", "j", "w", 0), Prefix("cpu", "j", "w", 1); a == b {
		t.Errorf("generations share a prefix %q", a)
	}
}
