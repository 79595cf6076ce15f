package members

import (
	"strings"
	"testing"
)

// TestPrefix: generations of a name have their own namespaces.
func TestPrefix(t *testing.T) {
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
