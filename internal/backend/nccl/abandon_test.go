package nccl

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAbandonRacesClose: Abandon was Stop (revoke, under c.mu) then a
// second critical section that sets abandoned. A Close waiting on c.mu
// meanwhile (the cuda host gate's watcher calls Abandon through
// abortGroup while Group.Close closes the communicators) gets the lock in
// between, saw revoked && !abandoned, and destroyed the revoked
// communicator: what Abandon exists to prevent (NCCL crashed there; found
// by review). The revoke and the mark are one step now.
func TestAbandonRacesClose(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "log")
	wrap := filepath.Join(dir, "wrap.c")
	src := `#undef ncclCommRevoke
#undef ncclCommDestroy
#include <stdio.h>
#include <unistd.h>
typedef struct { int nranks, rank, calls, revoked; } wrapComm;
int fake_revoke_inner(wrapComm*, int);
int fake_destroy_inner(wrapComm*);
int ncclCommRevoke(wrapComm* c, int flags) { usleep(20000); return fake_revoke_inner(c, flags); }
int ncclCommDestroy(wrapComm* c) {
  if (c->revoked) { FILE* f = fopen("` + logf + `", "a"); fputs("destroyed-revoked\n", f); fclose(f); }
  return fake_destroy_inner(c);
}
`
	if err := os.WriteFile(wrap, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := fakeLib(t, "-DncclCommRevoke=fake_revoke_inner", "-DncclCommDestroy=fake_destroy_inner", wrap)
	if !lib.HasRevoke {
		t.Fatal("no revoke")
	}
	for i := range 20 {
		c, err := New(t.Context(), Options{Timeout: time.Minute, GroupName: "abandon-race", Generation: uint64(i), Rank: 0, Size: 1, Store: newMemStore(), Lib: lib})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); c.Abandon() }() // e.g. abortGroup on the host gate's watcher
		time.Sleep(5 * time.Millisecond)             // Abandon is inside ncclCommRevoke, holding c.mu
		if err := c.Close(t.Context()); err != nil { // Group.Close
			t.Fatal(err)
		}
		wg.Wait()
		b, _ := os.ReadFile(logf)
		if strings.Contains(string(b), "destroyed-revoked") {
			t.Fatalf("try %d: Close destroyed a communicator that Abandon revoked (abandoned=%v now): Abandon's revoke and its abandoned mark are not atomic", i, c.abandoned)
		}
	}
}
