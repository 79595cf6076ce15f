package members

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// TestPresencesAcrossHosts: ranks 0 and 1 (this process, "hostA") wait in
// a store all-gather watched by their Presences; rank 2 ("hostB", a child
// process) announces its presence and exits without posting its part. Both
// waits fail within a second, naming rank 2 and its host (ErrPeerExited),
// not at the 30 s timeout; a rank that closes its Presences is not counted
// gone.
func TestPresencesAcrossHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok := rendezvous.NewToken()
	srv, err := rendezvous.NewServer("127.0.0.1:0", tok)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ranks := []int{0, 1, 2}
	var pres [2]*Presences
	var gathers [2]*Gather
	for r := range 2 {
		store, err := rendezvous.Dial(ctx, srv.Addr(), tok)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		if pres[r], err = Announce(ctx, store, r, "hostA"); err != nil {
			t.Fatal(err)
		}
		gathers[r] = NewGather("test: group \"dp\"", store, "presence-test", ranks, r, 30*time.Second)
		p := pres[r]
		gathers[r].Watch(func(q int, leaving bool) error { return p.Gone(ranks[q]) })
	}
	errc := make(chan error, 2)
	for r := range 2 {
		go func() {
			_, err := gathers[r].AllGather(ctx, []byte{byte(r)})
			errc <- err
		}()
	}
	early := make(chan error, 2)
	stopEarly := pres[0].OnGone([]int{1, 2}, func(err error) { early <- err })
	defer stopEarly()
	quiet := make(chan error, 1)
	stopQuiet := pres[0].OnGone([]int{1}, func(err error) { quiet <- err })
	c := startChild(t, "presence-exit", tok, "job", 2, 3, "SYMMEM_MT_STORE="+srv.Addr())
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("rank 2: %v\n%s", err, c.out.String())
	}
	exited := time.Now()
	for range 2 {
		err := <-errc
		took := time.Since(exited)
		if !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "rank 2 (host hostB) exited") {
			t.Fatalf("all-gather: %v, want ErrPeerExited naming rank 2 on hostB", err)
		}
		if took > time.Second {
			t.Fatalf("the all-gather failed %v after rank 2 exited, want < 1 s: %v", took, err)
		}
		t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	}
	select { // OnGone: once, naming the rank
	case err := <-early:
		if !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "rank 2 (host hostB)") {
			t.Fatalf("OnGone: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("OnGone did not fire within 1 s of rank 2's exit")
	}
	late := make(chan error, 1)
	defer pres[1].OnGone([]int{2}, func(err error) { late <- err })()
	select { // registered after the exit: fires at once
	case err := <-late:
		if !errors.Is(err, errs.PeerExited) {
			t.Fatalf("late OnGone: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a late OnGone did not fire")
	}
	if err := pres[1].Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := pres[1].Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := pres[0].Gone(1); err != nil {
		t.Fatalf("rank 1 closed cleanly, yet: %v", err)
	}
	if err := pres[0].Gone(2); !errors.Is(err, errs.PeerExited) {
		t.Fatalf("rank 2: %v", err)
	}
	select {
	case err := <-quiet:
		t.Fatalf("OnGone for rank 1, which left cleanly, fired: %v", err)
	case err := <-early:
		t.Fatalf("OnGone fired twice: %v", err)
	default:
	}
	stopQuiet()
	// The store goes away: every rank then counts as gone.
	srv.Close()
	deadline := time.Now().Add(5 * time.Second)
	for pres[0].Gone(0) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := pres[0].Gone(0); !errors.Is(err, errs.PeerExited) || !strings.Contains(err.Error(), "store went away") {
		t.Fatalf("after the store closed: %v", err)
	}
	if err := pres[0].Close(); err != nil {
		t.Fatalf("close after the store went away: %v", err)
	}
}
