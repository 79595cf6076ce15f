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
)

// cEdges makes, on a world of one, calls whose arguments a C caller may get
// wrong, each after a call that succeeds, and prints "name rc algo" per
// call: algo is symmem_group_last_path's "algo" after it (explain rows
// print "-").
const cEdges = `#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "symmem.h"

static symmem_group_t g;
static float x[8];

static void row(const char* name, int rc) {
  char buf[512], algo[64] = "";
  if (symmem_group_last_path(g, buf, sizeof buf) < 0) {
    printf("lastpath-failed %d %s\n", -1, symmem_last_error());
    return;
  }
  const char* a = strstr(buf, "\"algo\":\"");
  if (a != NULL) sscanf(a + 8, "%63[^\"]", algo);
  printf("%s %d %s\n", name, rc, algo);
}

static int ok(void) { return symmem_all_reduce(g, x, x, 8, SYMMEM_FLOAT32, SYMMEM_SUM, NULL, NULL); }

int main(void) {
  symmem_world_t w;
  if (symmem_init("cpu", 20000, 0, &w) != 0 || symmem_world_group(w, &g) != 0) {
    printf("init: %s\n", symmem_last_error());
    return 2;
  }
  row("ok", ok());
  ok(); row("dtype-77", symmem_all_reduce(g, x, x, 8, 77, SYMMEM_SUM, NULL, NULL));
  ok(); row("dtype-uint32", symmem_all_reduce(g, x, x, 8, SYMMEM_UINT32, SYMMEM_SUM, NULL, NULL));
  ok(); row("op-9", symmem_reduce_scatter(g, x, x, 8, SYMMEM_FLOAT32, 9, NULL, NULL));
  ok(); row("algo-bogus", symmem_all_gather(g, x, x, 8, SYMMEM_FLOAT32, NULL, "bogus"));
  ok(); row("algo-code-10", symmem_collective(g, SYMMEM_CALL(SYMMEM_ALL_REDUCE, SYMMEM_FLOAT32, SYMMEM_SUM, 10, 0), x, x, 8, NULL));
  ok(); row("count-overflow", symmem_all_gather(g, x, x, SIZE_MAX / 2, SYMMEM_FLOAT32, NULL, NULL));
  ok(); row("in-null", symmem_all_reduce(g, NULL, x, 8, SYMMEM_FLOAT32, SYMMEM_SUM, NULL, NULL));
  ok(); row("algo-nccl", symmem_all_reduce(g, x, x, 8, SYMMEM_FLOAT32, SYMMEM_SUM, NULL, "nccl"));
  char buf[512];
  struct { const char* name; size_t bytes; } ex[] = {
    {"explain-size-max", SIZE_MAX}, {"explain-int64-max+1", (size_t)INT64_MAX + 1}, {"explain-int64-max", (size_t)INT64_MAX}, {"explain-4096", 4096}};
  for (unsigned i = 0; i < sizeof ex / sizeof *ex; i++) {
    int rc = symmem_explain(g, SYMMEM_ALL_REDUCE, ex[i].bytes, 0, buf, sizeof buf);
    printf("%s %d - %s\n", ex[i].name, rc < 0 ? rc : 0, rc < 0 ? symmem_last_error() : buf);
  }
  return symmem_world_close(w) != 0 ? 3 : 0;
}
`

var edgeRow = regexp.MustCompile(`(?m)^(?:\[rank \d+\] )?([\w+-]+) (-?\d+) (\S*)(.*)$`)

// TestArgumentEdges: symmem_explain refuses a byte count past INT64_MAX
// (SIZE_MAX read as -1 explained an all-reduce of no bfloat16 element,
// with success), and a collective refused for its dtype, op, algorithm or
// count leaves symmem_group_last_path empty, as one the library refuses
// does (it kept the path of the call before).
func TestArgumentEdges(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc")
	}
	out := runC(t, cCommand(t, cc, cEdges).Path, nil)
	got := map[string][2]string{}
	for _, m := range edgeRow.FindAllStringSubmatch(out, -1) {
		got[m[1]] = [2]string{m[2], m[3]}
	}
	for _, tc := range []struct {
		name       string
		rc         int
		lastPathIs string // symmem_group_last_path's algo after the call ("-": not read)
	}{
		{"ok", 0, "direct"},
		{"dtype-77", statusInvalid, ""},
		{"dtype-uint32", statusNotSupported, ""},
		{"op-9", statusInvalid, ""},
		{"algo-bogus", statusInvalid, ""},
		{"algo-code-10", statusInvalid, ""},
		{"count-overflow", statusInvalid, ""},
		{"in-null", statusInvalid, ""},
		{"algo-nccl", statusNotSupported, ""},
		{"explain-size-max", statusInvalid, "-"},
		{"explain-int64-max+1", statusInvalid, "-"},
		{"explain-int64-max", 0, "-"},
		{"explain-4096", 0, "-"},
	} {
		g, ok := got[tc.name]
		if !ok {
			t.Errorf("%s: no row in the output", tc.name)
			continue
		}
		rc, _ := strconv.Atoi(g[0])
		if tc.rc == 0 && rc < 0 || tc.rc != 0 && rc != tc.rc || g[1] != tc.lastPathIs {
			t.Errorf("%s: status %d, last path algo %q; want status %d, algo %q", tc.name, rc, g[1], tc.rc, tc.lastPathIs)
		}
	}
	if t.Failed() {
		t.Logf("\n%s", out)
	}
}

// cCloseTwice closes one handle from two threads at once, argv[2] times:
// a group (argv[1] "group") or a world ("world"), and prints how often
// both got SYMMEM_OK and how often the loser got each status.
const cCloseTwice = `#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "symmem.h"

static uint64_t H;
static int group, iters, rcs[2];
static atomic_int go, done;

static void* closer(void* a) {
  int i = (int)(intptr_t)a;
  for (int it = 1; it <= iters; it++) {
    for (int spin = 0; atomic_load(&go) != it; spin++)
      if (spin > 1000) sched_yield();
    rcs[i] = group ? symmem_group_close(H) : symmem_world_close(H);
    atomic_fetch_add(&done, 1);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) return 1;
  group = strcmp(argv[1], "group") == 0;
  iters = atoi(argv[2]);
  symmem_world_t w = 0;
  if (group && symmem_init("cpu", 20000, 0, &w) != 0) {
    printf("init: %s\n", symmem_last_error());
    return 2;
  }
  int both = 0, losers[16] = {0};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, closer, (void*)(intptr_t)i);
  for (int it = 1; it <= iters; it++) {
    int r0 = 0, rc = group ? symmem_group_new(w, "g", &r0, 1, &H) : symmem_init("cpu", 20000, 0, &H);
    if (rc != 0) {
      printf("open: %s\n", symmem_last_error());
      return 3;
    }
    atomic_store(&go, it);
    while (atomic_load(&done) != 2 * it) sched_yield();
    if (rcs[0] == 0 && rcs[1] == 0)
      both++;
    else if ((rcs[0] == 0) + (rcs[1] == 0) == 1 && rcs[0] + rcs[1] < 0 && rcs[0] + rcs[1] > -16)
      losers[-(rcs[0] + rcs[1])]++;
    else
      printf("odd %d %d\n", rcs[0], rcs[1]);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  printf("both-ok 0 %d\n", both);
  for (int c = 1; c < 16; c++)
    if (losers[c]) printf("loser %d %d\n", -c, losers[c]);
  return group && symmem_world_close(w) != 0 ? 4 : 0;
}
`

// TestCloseTwiceAtOnce: two threads closing one group or world at once
// get SYMMEM_OK once and SYMMEM_ERR_BAD_HANDLE once, as two closes in
// sequence do (both got SYMMEM_OK when they met), like the scope ends of
// TestErrorCodes.
func TestCloseTwiceAtOnce(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc")
	}
	prog := cCommand(t, cc, cCloseTwice).Path
	for _, tc := range []struct{ what, iters string }{{"group", "300"}, {"world", "300"}} {
		t.Run(tc.what, func(t *testing.T) {
			out := runC(t, prog, []string{tc.what, tc.iters})
			if strings.Contains(out, "odd") || !strings.Contains(out, "both-ok 0 0\n") ||
				!strings.Contains(out, "loser "+strconv.Itoa(statusBadHandle)+" "+tc.iters+"\n") {
				t.Errorf("%s closed by two threads at once, %s times: want one SYMMEM_OK and one SYMMEM_ERR_BAD_HANDLE (%d) each time:\n%s",
					tc.what, tc.iters, statusBadHandle, out)
			}
		})
	}
}

// runC runs a compiled C program as a world of one under the launcher and
// returns its output (without the rank prefixes).
func runC(t *testing.T, prog string, args []string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := launch.Run(ctx, launch.Config{N: 1, Prog: prog, Args: args, Env: []string{"LD_LIBRARY_PATH=" + library(t)},
		Stdout: &out, Stderr: &out, Timeout: 2 * time.Minute})
	text := strings.ReplaceAll(out.String(), "[rank 0] ", "")
	if err != nil || code != 0 {
		t.Fatalf("exit %d, err %v:\n%s", code, err, text)
	}
	return text
}
