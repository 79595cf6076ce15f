package members

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// A group created again gets a new generation (and so a new namespace),
// also across backends of one process; other names, kinds and jobs count
// on their own.
var generationRuns atomic.Int64

func TestGeneration(t *testing.T) {
	// The counters are the process's: names unique to this run keep the
	// test repeatable (-count N).
	job := fmt.Sprintf("job-%d", generationRuns.Add(1))
	for i, want := range []int{0, 1, 2} {
		if got := Generation("cpu", job, "tp0"); got != want {
			t.Fatalf("call %d: generation %d, want %d", i, got, want)
		}
	}
	if g := Generation("cuda", job, "tp0"); g != 0 {
		t.Errorf("another backend kind: %d, want 0", g)
	}
	if g := Generation("cpu", job+"-other", "tp0"); g != 0 {
		t.Errorf("another job: %d, want 0", g)
	}
	if a, b := Prefix("cpu", "j", "w", 0), Prefix("cpu", "j", "w", 1); a == b {
		t.Errorf("generations share a prefix %q", a)
	}
}

func TestSegments(t *testing.T) {
	var s Segments[string]
	if err := s.Fresh("g", 1); err != nil {
		t.Fatal(err)
	}
	s.Add(1, "one")
	s.Add(2, "two")
	if err := s.Fresh("g", 1); err == nil || !strings.Contains(err.Error(), `group "g": segment 1 is already registered`) {
		t.Fatalf("Fresh of a registered segment: %v", err)
	}
	if v, ok := s.Get(2); !ok || v != "two" || s.Len() != 2 {
		t.Fatalf("Get(2) = %q, %v; Len %d", v, ok, s.Len())
	}
	if v, ok := s.Remove(1); !ok || v != "one" {
		t.Fatalf("Remove(1) = %q, %v", v, ok)
	}
	if _, ok := s.Remove(1); ok {
		t.Fatal("Remove of a removed segment reported it")
	}
	if vs := s.Drain(); len(vs) != 1 || vs[0] != "two" || s.Len() != 0 {
		t.Fatalf("Drain = %v, Len %d", vs, s.Len())
	}
}
