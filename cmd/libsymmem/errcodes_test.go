package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symmem/symmem/launch"
	"github.com/symmem/symmem/pool"
)

// cErrorCodes drives, on a world of one, the failures whose status codes
// TestErrorCodes checks: an allocation larger than the host's memory, one
// group more than the pool holds, and a scope ended by two threads at once
// (argv[1] times) and twice in sequence. Each prints "what rc message".
const cErrorCodes = `#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "symmem.h"

static symmem_scope_t S;
static atomic_int go, done;
static int rcs[2], iters;

/* Two threads spin until main starts a round, so their ends meet within
 * nanoseconds rather than a wake-up apart. */
static void* ender(void* a) {
  int i = (int)(intptr_t)a;
  for (int it = 1; it <= iters; it++) {
    for (int spin = 0; atomic_load(&go) != it; spin++)
      if (spin > 1000) sched_yield(); /* main needs a CPU too */
    rcs[i] = symmem_scope_end(S);
    atomic_fetch_add(&done, 1);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) return 1;
  iters = atoi(argv[1]);
  symmem_world_t w;
  symmem_group_t g;
  if (symmem_init("cpu", 20000, 0, &w) != 0 || symmem_world_group(w, &g) != 0) {
    printf("init: %s\n", symmem_last_error());
    return 2;
  }
  void* p = NULL;
  int rc = symmem_alloc(w, (size_t)1 << 46, &p);  /* 64 TiB: more than any test machine has */
  printf("alloc %d %s\n", rc, rc < 0 ? symmem_last_error() : "");

  static symmem_group_t gs[200];
  int n = 0, r0 = 0;
  for (; n < 200; n++) {
    char name[32];
    snprintf(name, sizeof name, "g%d", n);
    if ((rc = symmem_group_new(w, name, &r0, 1, &gs[n])) != 0) break;
  }
  printf("groups %d %s\n", rc, rc < 0 ? symmem_last_error() : "");
  printf("made %d\n", n);
  if (n > 0) {  /* closing one makes room */
    rc = symmem_group_close(gs[0]);
    if (rc == 0) rc = symmem_group_new(w, "again", &r0, 1, &gs[0]);
    printf("again %d %s\n", rc, rc < 0 ? symmem_last_error() : "");
  }

  int counts[16] = {0}; /* the loser's -rc */
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, ender, (void*)(intptr_t)i);
  for (int it = 1; it <= iters; it++) {
    if (symmem_scope_open(g, &S) != 0) {
      printf("scope_open: %s\n", symmem_last_error());
      return 3;
    }
    atomic_store(&go, it);
    while (atomic_load(&done) != 2 * it) sched_yield();
    int ok = (rcs[0] == 0) + (rcs[1] == 0), loser = rcs[0] == 0 ? rcs[1] : rcs[0];
    if (ok != 1 || loser >= 0 || loser < -15)
      printf("race-odd %d %d\n", rcs[0], rcs[1]);
    else
      counts[-loser]++;
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int c = 1; c < 16; c++)
    if (counts[c]) printf("race-loser %d %d\n", -c, counts[c]);

  if (symmem_scope_open(g, &S) != 0 || symmem_scope_end(S) != 0) return 4;
  rc = symmem_scope_end(S);
  printf("sequential %d %s\n", rc, rc < 0 ? symmem_last_error() : "");
  return symmem_world_close(w) != 0 ? 5 : 0;
}
`

var statusLine = regexp.MustCompile(`(?m)^(?:\[rank \d+\] )?(\w[\w-]*) (-?\d+) ?(.*)$`)

// TestErrorCodes: out of memory is SYMMEM_ERR_NO_MEMORY (it was
// SYMMEM_ERR_INTERNAL), the group past the pool's limit is
// SYMMEM_ERR_INVALID naming the limit and the remedy (it was INTERNAL),
// and the loser of two threads ending one scope gets SYMMEM_ERR_BAD_HANDLE,
// as a second end in sequence does (it got SYMMEM_ERR_INVALID).
func TestErrorCodes(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc")
	}
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	cmd := cCommand(t, cc, cErrorCodes)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := launch.Run(ctx, launch.Config{N: 1, Prog: cmd.Path, Args: []string{strconv.Itoa(iters)},
		Env: []string{"LD_LIBRARY_PATH=" + library(t)}, Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
	if err != nil || code != 0 {
		t.Fatalf("exit %d, err %v:\n%s", code, err, out.String())
	}
	t.Logf("\n%s", out.String())
	type result struct {
		rc  int
		msg string
	}
	got := map[string]result{}
	losers := map[int]int{}
	for _, m := range statusLine.FindAllStringSubmatch(out.String(), -1) {
		rc, _ := strconv.Atoi(m[2])
		if m[1] == "race-loser" {
			n, _ := strconv.Atoi(m[3])
			losers[rc] += n
			continue
		}
		got[m[1]] = result{rc, m[3]}
	}
	if r := got["alloc"]; r.rc != statusNoMemory || !strings.Contains(r.msg, "not enough memory") {
		t.Errorf("symmem_alloc of 64 TiB: %d %q, want SYMMEM_ERR_NO_MEMORY (%d) saying there is not enough memory", r.rc, r.msg, statusNoMemory)
	}
	if r := got["groups"]; r.rc != statusInvalid || !strings.Contains(r.msg, strconv.Itoa(pool.MaxGroups)) ||
		!strings.Contains(r.msg, "symmem_group_close") {
		t.Errorf("the group past the pool's limit: %d %q, want SYMMEM_ERR_INVALID (%d) naming the limit %d and symmem_group_close",
			r.rc, r.msg, statusInvalid, pool.MaxGroups)
	}
	if n := got["made"].rc; n != pool.MaxGroups-1 { // the world group holds one
		t.Errorf("made %d groups beside the world group, want %d", n, pool.MaxGroups-1)
	}
	if r := got["again"]; r.rc != statusOK {
		t.Errorf("a group after closing one: %d %q, want SYMMEM_OK", r.rc, r.msg)
	}
	seq := got["sequential"]
	if seq.rc != statusBadHandle {
		t.Errorf("a scope ended twice in sequence: %d %q, want SYMMEM_ERR_BAD_HANDLE (%d)", seq.rc, seq.msg, statusBadHandle)
	}
	if strings.Contains(out.String(), "race-odd") || len(losers) != 1 || losers[seq.rc] != iters {
		t.Errorf("a scope ended by two threads at once, %d times: the loser's codes %v (code: times), want %d only, as in sequence",
			iters, losers, seq.rc)
	}
}
