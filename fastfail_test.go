package symmem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/rendezvous"
)

// Fast failure: after a peer died or stopped, the survivors' errors and
// World.Close come within about a second of the failure being known, also
// when rank 0 hosts the store and its exit barrier waits for the others.

func init() {
	roles["close-after-death"] = roleCloseAfterDeath
	roles["stopped"] = roleStopped
}

// selfHosted makes rank 0 host the store (as under torchrun), on a free port.
func selfHosted(t *testing.T) []string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	// The store's own port (not MASTER_PORT+1, which nobody checked is free).
	return []string{"SYMMEM_STORE_HOSTED=0", rendezvous.VarStorePort + "=" + port}
}

// TestCloseAfterDeath: rank 2 of 3 dies (SIGKILL) during all-reduces; ranks
// 0 and 1 get the error and their Close returns within 3 s (the timeout is
// 10 s, the exit barrier's 30 s).
func TestCloseAfterDeath(t *testing.T) {
	t.Parallel()
	res := spawn(t, 3, "close-after-death", selfHosted(t)...)
	if res[2].code == 0 {
		t.Errorf("rank 2 should have died:\n%s", res[2].out)
	}
	expectOK(t, res[:2])
}

// TestStoppedRank: rank 1 of 2 stops joining; rank 0's all-reduce fails at
// the timeout (1.5 s) and its Close within 1.5 s more, not after another
// timeout plus the exit barrier.
func TestStoppedRank(t *testing.T) {
	t.Parallel()
	res := spawn(t, 2, "stopped", selfHosted(t)...)
	expectOK(t, res[:1])
}

func roleCloseAfterDeath(ctx context.Context) error {
	o := testOptions()
	o.Timeout = 10 * time.Second
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 1<<16)
	if err != nil {
		return err
	}
	if w.Rank() == 2 {
		time.AfterFunc(20*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	for i := 0; err == nil; i++ {
		if i == 1e6 {
			return errors.New("rank 2 never died")
		}
		_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	}
	if err := expectErr("AllReduce with a dead rank", err, nil, "rank 2"); err != nil {
		return err
	}
	start := time.Now()
	cerr := w.Close()
	took := time.Since(start)
	fmt.Printf("Close after %v: %v\n", took.Round(time.Millisecond), cerr)
	if took > 3*time.Second {
		return fmt.Errorf("Close took %v after the death was known (%v)", took, cerr)
	}
	return nil
}

func roleStopped(ctx context.Context) error {
	o := testOptions()
	o.Timeout = 1500 * time.Millisecond
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	g := w.World()
	b, err := allocBufs(ctx, g, 1<<16)
	if err != nil {
		return err
	}
	if w.Rank() == 1 {
		if err := w.store.Set(ctx, "test/pid1", []byte(strconv.Itoa(os.Getpid()))); err != nil {
			return err
		}
		// Alive but never joining, like a stopped process (SIGSTOP itself
		// is undone at once here: the test's process group is orphaned, so
		// the kernel sends SIGCONT).
		time.Sleep(time.Minute)
		return errors.New("rank 1 was not killed")
	}
	pid, err := w.store.Wait(ctx, "test/pid1")
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(string(pid[0]))
	if err != nil || p <= 0 { // kill(0) would hit the whole process group
		return fmt.Errorf("rank 1 published pid %q", pid[0])
	}
	defer syscall.Kill(p, syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond) // rank 1 has stopped by now
	start := time.Now()
	_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, coll.Float32, coll.Sum)
	failed := time.Since(start)
	if err := expectErr("AllReduce with a stopped rank", err, nil, "rank 1"); err != nil {
		return err
	}
	if failed > o.Timeout+time.Second {
		return fmt.Errorf("the error came after %v, the timeout is %v", failed, o.Timeout)
	}
	start = time.Now()
	cerr := w.Close()
	took := time.Since(start)
	fmt.Printf("error after %v, Close after %v more: %v\n", failed.Round(time.Millisecond), took.Round(time.Millisecond), cerr)
	if took > 1500*time.Millisecond {
		return fmt.Errorf("Close took %v after the failure was known (%v)", took, cerr)
	}
	return nil
}
