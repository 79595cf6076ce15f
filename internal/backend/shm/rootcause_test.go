package shm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/backend/internal/members"
	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// A survivor that gave up on a dead rank and exited looks dead to the
// others; their errors must still lead to the first death.
func TestRootCauseNamesFirstDeath(t *testing.T) {
	srv, err := rendezvous.NewServer("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rendezvous.Dial(ctx, srv.Addr(), "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := &Group{Head: members.Head{Store: c}, b: &Backend{env: rendezvous.Env{JobID: "job"}}}
	wrap := func(r int) error { return fmt.Errorf("phase 0: %w", &PeerExitedError{Rank: r, Pid: 100 + r}) }

	first := g.rootCause(wrap(1)) // rank 0 sees rank 1 die first
	if !errors.Is(first, errs.PeerExited) || strings.Contains(first.Error(), "died first") {
		t.Fatalf("first death: %v", first)
	}
	again := g.rootCause(wrap(1)) // another survivor sees the same death
	if strings.Contains(again.Error(), "died first") {
		t.Fatalf("same death reported as a cascade: %v", again)
	}
	cascade := g.rootCause(wrap(0)) // rank 2 then sees rank 0 exit
	if !errors.Is(cascade, errs.PeerExited) || !strings.Contains(cascade.Error(), "rank 0 (pid 100) exited") ||
		!strings.Contains(cascade.Error(), "rank 1 died first") {
		t.Fatalf("cascade: %v", cascade)
	}
	if other := g.rootCause(errors.New("timeout")); other.Error() != "timeout" {
		t.Fatalf("non-death error changed: %v", other)
	}
}
