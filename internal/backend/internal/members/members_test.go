package members

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/rendezvous"
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

// TestSwapPeerGaveUp: a rank that comes to a group's fd swap after a
// member gave up (its setup timed out; its process lives on) was told after
// its whole timeout that the member was "not listening ... (has it called
// NewFDExchange?)"; the member posted to the group's all-gather, so its
// exchange had been listening: the swap fails at once saying it closed.
func TestSwapPeerGaveUp(t *testing.T) {
	tok, job := rendezvous.NewToken(), rendezvous.NewJobID()
	mark := filepath.Join(t.TempDir(), "closed")
	startChild(t, "swap-gave-up", tok, job, 1, 2, "SYMMEM_MT_MARK="+mark)
	x, err := rendezvous.NewFDExchange(rendezvous.Env{Rank: 0, WorldSize: 2, Token: tok, JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(mark); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("rank 1 never closed its exchange")
		}
	}
	const timeout = 5 * time.Second
	start := time.Now()
	err = Swap(context.Background(), x, "swap", "pad", []int{0, 1}, 0, timeout, 0, func(int, int) error { return nil })
	el := time.Since(start)
	t.Logf("after %v: %v", el.Round(time.Millisecond), err)
	if !errors.Is(err, rendezvous.ErrUnreachable) || !strings.Contains(err.Error(), "rank 1 closed its fd exchange") ||
		!strings.Contains(err.Error(), "gave up") {
		t.Errorf("err = %v, want rank 1 named as having closed its exchange", err)
	}
	if el > timeout/2 {
		t.Errorf("reported after %v (timeout %v)", el, timeout)
	}
}
