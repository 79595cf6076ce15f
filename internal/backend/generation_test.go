package backend

import (
	"fmt"
	"sync/atomic"
	"testing"
)

var generationRuns atomic.Int64

// TestGeneration: a name used again gets a new generation; other names and
// jobs count on their own.
func TestGeneration(t *testing.T) {
	// The counters are the process's: names unique to this run keep the
	// test repeatable (-count N).
	job := fmt.Sprintf("job-%d", generationRuns.Add(1))
	for i, want := range []int{0, 1, 2} {
		if got := Generation(job, "tp0"); got != want {
			t.Fatalf("call %d: generation %d, want %d", i, got, want)
		}
	}
	if g := Generation(job, "tp1"); g != 0 {
		t.Errorf("another name: %d, want 0", g)
	}
	if g := Generation(job+"-other", "tp0"); g != 0 {
		t.Errorf("another job: %d, want 0", g)
	}
}
