package main

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/symmem/symmem"
	"github.com/symmem/symmem/rendezvous"
)

// TestOptionsTimeout: timeout_ms up to what a time.Duration holds is taken
// as it is; above it, an invalid-argument error names timeout_ms and its
// maximum instead of a wrapped (or negative) timeout.
func TestOptionsTimeout(t *testing.T) {
	o, err := options(nil, 9223372036854, 0) // the maximum
	if err != nil || o.Timeout.Milliseconds() != 9223372036854 {
		t.Errorf("timeout_ms 9223372036854: %v, %v; want that many milliseconds", o.Timeout, err)
	}
	for _, tc := range []struct {
		opts func() (symmem.Options, error)
		ms   string
	}{
		{func() (symmem.Options, error) { return options(nil, 9223372036855, 0) }, "9223372036855"},
		{func() (symmem.Options, error) { return options(nil, 20000000000000, 0) }, "20000000000000"},
		{func() (symmem.Options, error) { return options(nil, 1<<63-1, 0) }, "9223372036854775807"},
	} {
		o, err := tc.opts()
		if err == nil || !errors.Is(err, symmem.ErrInvalid) || !strings.Contains(err.Error(), "timeout_ms "+tc.ms) ||
			!strings.Contains(err.Error(), "maximum 9223372036854") {
			t.Errorf("timeout_ms %s: timeout %v, error %v; want an invalid-argument error naming timeout_ms and its maximum", tc.ms, o.Timeout, err)
		}
	}
}

// cWorlds opens two worlds of one rank (store ports from argv), then checks
// the report functions with a capacity of SIZE_MAX and which world the
// PyTorch allocator hooks use as worlds close.
const cWorlds = `#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "symmem.h"

static symmem_world_t start(const char* port, const char* job) {
  symmem_world_t w = 0;
  int rc = symmem_init_explicit(0, 1, 0, 1, "127.0.0.1", atoi(port), "tok", job, "cpu", 20000, 0, &w);
  if (rc != SYMMEM_OK) {
    printf("symmem_init_explicit: status %d: %s\n", rc, symmem_last_error());
    exit(2);
  }
  return w;
}

int main(int argc, char** argv) {
  if (argc != 3) return 1;
  symmem_world_t a = start(argv[1], "worlds-a"), b = start(argv[2], "worlds-b");
  /* SIZE_MAX, as callers pass for "big enough": only the text and its NUL are written. */
  char buf[16];
  memset(buf, 'x', sizeof buf);
  int n = symmem_world_backend(a, buf, SIZE_MAX);
  if (n != 3 || strcmp(buf, "cpu") != 0 || buf[4] != 'x') {
    printf("symmem_world_backend(SIZE_MAX) = %d, %.16s\n", n, buf);
    return 3;
  }
  /* Closing the newest world leaves the hooks the older one, which refuses by its backend. */
  if (symmem_world_close(b) != SYMMEM_OK) return 4;
  if (symmem_torch_alloc(64, 0, NULL) != NULL) return 5;
  if (strstr(symmem_last_error(), "cpu backend") == NULL) {
    printf("torch_alloc with world a still open: %s\n", symmem_last_error());
    return 6;
  }
  if (symmem_world_close(a) != SYMMEM_OK) return 7;
  if (symmem_torch_alloc(64, 0, NULL) != NULL || strstr(symmem_last_error(), "no open symmem world") == NULL) {
    printf("torch_alloc with no world open: %s\n", symmem_last_error());
    return 8;
  }
  printf("ok\n");
  return 0;
}
`

func TestWorldsFromC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to build a C program against include/symmem.h")
	}
	// A world of one hosts its store on master_port+1: two free ports, less one.
	var ports []string
	var held []net.Listener // both picked before either closes, so they differ
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port-1))
	}
	for _, l := range held {
		l.Close()
	}
	cmd := cCommand(t, cc, cWorlds, ports...)
	var env []string
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, rendezvous.VarStoreHosted+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the C program failed (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok") {
		t.Fatalf("the C program did not finish:\n%s", out)
	}
}

// TestTorchAllocDevice: the PyTorch alloc hook serves only the world's GPU.
// PyTorch passes the device it allocates for; pool memory is the world's
// GPU's, so another device is refused with an error that says which GPU to
// make current, rather than a tensor labelled with one device whose memory
// is on another. (The hook's other refusals run in TestWorldsFromC; this
// one needs a cuda world, so its check is tested on its own.)
func TestTorchAllocDevice(t *testing.T) {
	if msg := torchDeviceError(64, 3, 3); msg != "" {
		t.Errorf("device 3 on a world of GPU 3 refused: %s", msg)
	}
	for _, tc := range []struct{ device, world int }{{1, 0}, {0, 1}, {-1, 0}} {
		msg := torchDeviceError(64, tc.device, tc.world)
		for _, want := range []string{"symmem_torch_alloc(64 bytes, device " + strconv.Itoa(tc.device) + ")",
			"this rank's GPU " + strconv.Itoa(tc.world), "torch.cuda.set_device"} {
			if !strings.Contains(msg, want) {
				t.Errorf("device %d on a world of GPU %d: %q, want it to contain %q", tc.device, tc.world, msg, want)
			}
		}
	}
}
