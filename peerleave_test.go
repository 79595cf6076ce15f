package symmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
)

// A rank that leaves while its peers wait for it: they hear of it within a
// second, by name and by how it left, and every rank's Close is as quick.

func init() { roles["peerleave"] = rolePeerLeave }

// leaveBound is the promise (a second), with room for the race detector
// on a 2-core machine running other tests beside.
func leaveBound() time.Duration {
	if raceEnabled {
		return 2 * time.Second
	}
	return time.Second
}

// TestPeerLeaves: rank 1 of 2 leaves — World.Close, os.Exit without
// Close, SIGKILL, or Close of the group only (group-close) — while rank 0
// waits for it in a collective, a scope end or NewGroup (a store
// exchange). Rank 0's call fails within leaveBound of the leaving, naming
// rank 1 and wrapping ErrPeerClosed or ErrPeerExited; rank 0's Close and
// the closing rank's own Close take less than leaveBound too (the timeout
// is 20 s). The calls run on a two-rank subgroup "pair" of the world.
func TestPeerLeaves(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"close", "exit", "kill", "group-close"} {
		for _, where := range []string{"collective", "scope-end", "newgroup"} {
			if how == "group-close" && where == "newgroup" {
				continue // NewGroup is the world's call, not the closed group's
			}
			t.Run(how+"/"+where, func(t *testing.T) {
				t.Parallel()
				// The race runtime sleeps a second in os.Exit by default:
				// the process would still live then.
				res := spawn(t, 2, "peerleave", "TEST_LEAVE_HOW="+how, "TEST_LEAVE_WHERE="+where, "GORACE=atexit_sleep_ms=0")
				if how == "kill" {
					if res[1].code == 0 {
						t.Errorf("rank 1 should have been killed:\n%s", res[1].out)
					}
					res[1] = rankResult{}
				}
				expectOK(t, res)
			})
		}
	}
}

func rolePeerLeave(ctx context.Context) error {
	how, where := os.Getenv("TEST_LEAVE_HOW"), os.Getenv("TEST_LEAVE_WHERE")
	w, err := Init(ctx, testOptions())
	if err != nil {
		return err
	}
	g, err := w.NewGroup(ctx, "pair", []int{0, 1})
	if err != nil {
		return err
	}
	b, err := allocBufs(ctx, g, 1<<16)
	if err != nil {
		return err
	}
	if _, err := g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum); err != nil {
		return err
	}
	bound := leaveBound()
	if w.Rank() == 1 {
		time.Sleep(300 * time.Millisecond) // rank 0 waits (asleep) by now
		if err := w.store.Set(ctx, "test/left", []byte(strconv.FormatInt(time.Now().UnixNano(), 10))); err != nil {
			return err
		}
		switch how {
		case "exit":
			os.Exit(0)
		case "kill":
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
		start := time.Now()
		var cerr error
		if how == "group-close" {
			// Rank 0 fails its call, then closes its world: this rank's
			// Close meets that instead of rank 0's Group.Close.
			cerr = g.Close(ctx)
			if cerr == nil {
				return fmt.Errorf("Close of the group succeeded while rank 0 waited in a %s", where)
			}
		} else {
			cerr = w.Close()
		}
		took := time.Since(start)
		fmt.Printf("Close after %v: %v\n", took.Round(time.Millisecond), cerr)
		if took > bound {
			return fmt.Errorf("Close took %v while rank 0 waited in a %s (%v)", took, where, cerr)
		}
		return nil
	}
	switch where {
	case "collective":
		_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	case "scope-end":
		var sc *Scope
		if sc, err = g.OpenScope(); err != nil {
			return err
		}
		if _, err = sc.Alloc(4096); err != nil {
			return err
		}
		err = sc.End(ctx)
	case "newgroup":
		_, err = w.NewGroup(ctx, "late", []int{0, 1})
	}
	failed := time.Now()
	v, gerr := w.store.Get(ctx, "test/left")
	if gerr != nil {
		return fmt.Errorf("%s returned %v before rank 1 left (%v)", where, err, gerr)
	}
	ns, _ := strconv.ParseInt(string(v), 10, 64)
	after := failed.Sub(time.Unix(0, ns))
	sentinel := ErrPeerClosed
	if how == "exit" || how == "kill" {
		sentinel = ErrPeerExited
	}
	if err := expectErr(where, err, sentinel, "rank 1"); err != nil {
		return err
	}
	if after > bound {
		return fmt.Errorf("%s failed %v after rank 1 left: %v", where, after, err)
	}
	start := time.Now()
	cerr := w.Close()
	took := time.Since(start)
	fmt.Printf("%s failed %v after rank 1 left: %v\nClose after %v: %v\n", where, after.Round(time.Millisecond), err, took.Round(time.Millisecond), cerr)
	if took > bound {
		return fmt.Errorf("Close took %v after rank 1 left (%v)", took, cerr)
	}
	if errors.Is(err, ErrMismatch) {
		return fmt.Errorf("%s: %v wraps ErrMismatch: nothing differed, rank 1 left", where, err)
	}
	return nil
}
