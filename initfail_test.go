package symmem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// A failed Init returns within its timeout plus a moment, also where rank 0
// hosts the store (torchrun's way, no SYMMEM_STORE): its cleanup's exit
// barrier used to wait 30 s more for ranks that had already given up or
// never came (Init failed after 33 s with a 3 s timeout).

func init() { roles["initlate"] = roleInitLate }

func TestInitFailureReturnsWithinTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		late  int    // the rank that comes late
		delay string // how late; "never": it never calls Init
	}{
		{"rank 1 never comes", 1, "never"},
		{"rank 0 later than the timeout", 0, "2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			// Rank 0 hosts the store on SYMMEM_PORT, as under torchrun.
			res := spawn(t, 3, "initlate", "SYMMEM_STORE_HOSTED=", "SYMMEM_STORE=", "SYMMEM_PORT="+strconv.Itoa(port),
				"SYMMEM_TEST_LATE="+strconv.Itoa(tc.late), "SYMMEM_TEST_DELAY="+tc.delay)
			expectOK(t, res)
		})
	}
}

func roleInitLate(ctx context.Context) error {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	if strconv.Itoa(rank) == os.Getenv("SYMMEM_TEST_LATE") {
		if os.Getenv("SYMMEM_TEST_DELAY") == "never" {
			return nil
		}
		d, _ := time.ParseDuration(os.Getenv("SYMMEM_TEST_DELAY"))
		time.Sleep(d)
	}
	o := testOptions()
	o.Backend = "cpu"
	o.Timeout = time.Second
	t0 := time.Now()
	w, err := Init(ctx, o)
	el := time.Since(t0)
	switch {
	case err == nil:
		w.Close()
		return errors.New("Init succeeded without every rank")
	case el > 10*time.Second: // ~2 s expected (the timeout, then a 1 s exit wait); 30 s more before the fix
		return fmt.Errorf("Init failed after %v with a timeout of 1 s: %v", el.Round(time.Millisecond), err)
	}
	fmt.Printf("Init failed after %v: %v\n", el.Round(time.Millisecond), err)
	return nil
}
