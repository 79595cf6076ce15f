package rendezvous

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

func testEnv(rank, world int, tok, job string) Env {
	return Env{Rank: rank, WorldSize: world, LocalRank: rank, LocalWorldSize: world, Token: tok, JobID: job}
}

// TestFDPassTwoProcesses: a child process sends a memfd; we write through the
// received descriptor and send it back; the child checks it is its own file
// and sees our write.
func TestFDPassTwoProcesses(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	x, err := NewFDExchange(testEnv(0, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	cmd, out := startRole(t, "fdsend", rankEnv(1, 2, "127.0.0.1", 1, tok, job))
	ctx := tctx(t, 20*time.Second)
	fds, err := x.Recv(ctx, 1, "seg")
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%v\nchild: %s", err, out)
	}
	if len(fds) != 1 {
		t.Fatalf("got %d fds", len(fds))
	}
	buf := make([]byte, 16)
	if _, err := unix.Pread(fds[0], buf, 0); err != nil || string(buf) != "hello-from-child" {
		t.Fatalf("read through received fd: %q %v", buf, err)
	}
	if _, err := unix.Pwrite(fds[0], []byte("pong"), 100); err != nil {
		t.Fatal(err)
	}
	if err := x.Send(ctx, 1, "ack", fds); err != nil {
		// EOF instead of the child's reply: the child's exit cut its
		// answer (fixed: TestFDSendAnsweredBeforeReceiverCloses); the
		// child's side says why if it comes back.
		cmd.Process.Kill()
		werr := cmd.Wait()
		t.Fatalf("%v\nchild (%v): %s", err, werr, out)
	}
	unix.Close(fds[0])
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestFDWrongTokenProcess(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	x, err := NewFDExchange(testEnv(0, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	before := countFDs(t)
	cmd, out := startRole(t, "fdbadtoken", rankEnv(1, 2, "127.0.0.1", 1, "not-the-token", job))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "token refused: check SYMMEM_TOKEN") {
		t.Fatalf("child output lacks the refusal: %s", out)
	}
	if _, err := x.Recv(tctx(t, 100*time.Millisecond), 1, "seg"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("refused descriptors reached the mailbox: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if after := countFDs(t); after > before {
		t.Fatalf("descriptor leak after refusal: %d -> %d", before, after)
	}
}

func TestFDUnclaimedClosedNoLeak(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	before := countFDs(t)
	a, err := NewFDExchange(testEnv(0, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewFDExchange(testEnv(1, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t, 5*time.Second)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"x", "x", "y"} {
		if err := a.Send(ctx, 1, tag, p[:]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Recv(ctx, 0, "x") // claim one; the other two stay in the mailbox
	if err != nil || len(got) != 2 {
		t.Fatalf("recv: %v %v", got, err)
	}
	closeFDs(got)
	unix.Close(p[0])
	unix.Close(p[1])
	if during := countFDs(t); during <= before {
		t.Fatalf("expected unclaimed descriptors to be held: %d vs %d", during, before)
	}
	a.Close()
	b.Close()
	if after := countFDs(t); after != before {
		t.Fatalf("descriptor leak: %d before, %d after Close", before, after)
	}
	if _, err := b.Recv(ctx, 0, "y"); !errors.Is(err, ErrClosed) {
		t.Fatalf("recv after close: %v", err)
	}
}

func TestFDErrors(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	x, err := NewFDExchange(testEnv(0, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := NewFDExchange(testEnv(0, 2, tok, job)); err == nil {
		t.Fatal("second listener for the same rank accepted")
	}
	if _, err := NewFDExchange(Env{Rank: 0, WorldSize: 1, Token: tok}); !errors.Is(err, ErrBadEnv) {
		t.Fatalf("no job id: %v", err)
	}
	ctx := tctx(t, 5*time.Second)
	cases := map[string]error{
		"bad rank": x.Send(ctx, 2, "t", []int{0}),
		"no fds":   x.Send(ctx, 1, "t", nil),
		"no tag":   x.Send(ctx, 1, "", []int{0}),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Rank 1 never starts: Send retries, then names the socket.
	err = x.Send(tctx(t, 200*time.Millisecond), 1, "t", []int{0})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), SocketName(job, 1)) {
		t.Fatalf("unreachable peer: %v", err)
	}
	_, err = x.Recv(tctx(t, 100*time.Millisecond), 1, "seg")
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `rank 1 never sent "seg"`) {
		t.Fatalf("recv timeout: %v", err)
	}
}

// TestFDSendAnsweredBeforeReceiverCloses: a receiver that gets the
// descriptors and closes at once (a process that exits after its last
// Recv) must not cut the sender off before its reply: the sender saw "no
// reply: EOF" (TestFDPassTwoProcesses, now and then).
func TestFDSendAnsweredBeforeReceiverCloses(t *testing.T) {
	fd, err := unix.MemfdCreate("symmem-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := range 300 {
		tok, job := NewToken(), NewJobID()
		sender, err := NewFDExchange(testEnv(0, 2, tok, job))
		if err != nil {
			t.Fatal(err)
		}
		receiver, err := NewFDExchange(testEnv(1, 2, tok, job))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			fds, err := receiver.Recv(tctx(t, 10*time.Second), 0, "ack")
			closeFDs(fds)
			receiver.Close()
			got <- err
		}()
		if err := sender.Send(tctx(t, 10*time.Second), 1, "ack", []int{fd}); err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		sender.Close()
	}
}
