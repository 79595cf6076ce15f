package rendezvous

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdRoleVar makes the re-executed test binary run one of this file's child
// roles (a rank of an fd exchange in a process of its own).
const fdRoleVar = "SYMMEM_FDX_TEST_ROLE"

func init() {
	if role := os.Getenv(fdRoleVar); role != "" {
		if err := runFDRole(role); err != nil {
			fmt.Printf("role %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// runFDRole is rank 1 of 2 (rankEnv). It prints a line at each step the
// parent waits for, then stays alive until its stdin closes.
func runFDRole(role string) error {
	e, err := EnvFromOS()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x, err := NewFDExchange(e)
	if err != nil {
		return err
	}
	linger := func() { io.Copy(io.Discard, os.Stdin) }
	switch role {
	case "listen-close": // listens, gives up without a word (an Init that timed out), lives on
		fmt.Println("listening")
		x.Close()
		fmt.Println("closed")
		linger()
		return nil
	case "send-close": // sends to rank 0, then gives up and lives on
		if err := x.Send(ctx, 0, "hello", []int{0}); err != nil {
			return err
		}
		x.Close()
		fmt.Println("closed")
		linger()
		return nil
	case "low-files": // receives with FDX_FREE free descriptor slots in its process
		defer x.Close()
		free, _ := strconv.Atoi(os.Getenv("FDX_FREE"))
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
			return err
		}
		var filler []int // every slot taken, then free of them given back
		for {
			fd, err := unix.Dup(0)
			if err != nil {
				break
			}
			filler = append(filler, fd)
		}
		closeFDs(filler[:free])
		fmt.Println("ready")
		if os.Getenv("FDX_SEND") != "" { // the sender is the one without room
			// The runtime may close a descriptor at any time (a finalizer
			// after a GC): a send that found one free is tried again, on
			// a fresh tag, after the table is filled once more.
			var err error
			var took time.Duration
			for try := range 3 {
				runtime.GC()
				time.Sleep(10 * time.Millisecond) // the finalizers that GC queued
				for {
					if _, err := unix.Dup(0); err != nil {
						break
					}
				}
				start := time.Now()
				err = x.Send(ctx, 0, fmt.Sprintf("seg%d", try), []int{0})
				took = time.Since(start)
				if err != nil {
					break
				}
			}
			fmt.Printf("send: after %v: %v\n", took.Round(time.Millisecond), err)
			linger()
			return nil
		}
		fds, err := x.Recv(ctx, 0, "seg")
		fmt.Printf("recv: %d descriptors, err: %v\n", len(fds), err)
		closeFDs(fds)
		linger()
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// fdChild is rank 1 in a process of its own running role.
type fdChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startFDChild(t *testing.T, role, tok, job string, extra ...string) *fdChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fdRoleVar+"="+role)
	for k, v := range rankEnv(1, 2, "127.0.0.1", 1, tok, job) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, extra...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &fdChild{cmd: cmd, stdin: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return c
}

// await returns the child's next line that starts with prefix.
func (c *fdChild) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			t.Logf("child: %s", l)
		case <-timeout:
			t.Fatalf("child did not print %q", prefix)
		}
	}
}

// TestFDSendToRankThatGaveUp: a rank that comes to the exchange after its
// peer gave up (closed its exchange: its call timed out, and its process
// lives on) was told, after its whole timeout, that the peer was "not
// listening ... (has it called NewFDExchange?)".
func TestFDSendToRankThatGaveUp(t *testing.T) {
	for _, tc := range []struct {
		role    string
		started bool // the caller knows rank 1 listened (Started)
		want    []string
	}{
		{"send-close", false, []string{"rank 1 closed its fd exchange", "gave up"}},
		{"listen-close", true, []string{"rank 1 closed its fd exchange", "gave up"}},
		{"listen-close", false, []string{"rank 1 is not listening", "has not created its fd exchange yet", "closed it already"}},
	} {
		t.Run(fmt.Sprintf("%s/started=%v", tc.role, tc.started), func(t *testing.T) {
			tok, job := NewToken(), NewJobID()
			x, err := NewFDExchange(testEnv(0, 2, tok, job))
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			c := startFDChild(t, tc.role, tok, job)
			if tc.role == "send-close" {
				fds, err := x.Recv(tctx(t, 20*time.Second), 1, "hello")
				if err != nil {
					t.Fatal(err)
				}
				closeFDs(fds)
			}
			c.await(t, "closed")
			if tc.started {
				x.Started(1)
			}
			const limit = 3 * time.Second
			start := time.Now()
			err = x.Send(tctx(t, limit), 1, "seg", []int{0})
			el := time.Since(start)
			t.Logf("after %v: %v", el.Round(time.Millisecond), err)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("err = %v, want ErrUnreachable", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q", w)
				}
			}
			if known := tc.role == "send-close" || tc.started; known && el > limit/2 {
				t.Errorf("a rank known to have closed its exchange was retried for %v", el)
			}
		})
	}
}

// TestFDReceiverOutOfDescriptors: a receiver whose process has fewer free
// descriptor slots (RLIMIT_NOFILE) than the message carries.
func TestFDReceiverOutOfDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name string
		free int // the receiver's free slots
		send int // descriptors sent
		want []string
	}{
		{"no room for the descriptors", 3, 8, []string{"out of file descriptors", "RLIMIT_NOFILE"}},
		{"no room for the connection", 0, 1, []string{"out of file descriptors", "RLIMIT_NOFILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, job := NewToken(), NewJobID()
			x, err := NewFDExchange(testEnv(0, 2, tok, job))
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			c := startFDChild(t, "low-files", tok, job, "FDX_FREE="+strconv.Itoa(tc.free))
			c.await(t, "ready")
			fds := make([]int, tc.send)
			for i := range fds {
				fds[i] = 0
			}
			start := time.Now()
			err = x.Send(tctx(t, 3*time.Second), 1, "seg", fds)
			t.Logf("sender after %v: %v", time.Since(start).Round(time.Millisecond), err)
			got := c.await(t, "recv:")
			t.Logf("receiver: %s", got)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("sender's error lacks %q", w)
				}
				if !strings.Contains(got, w) {
					t.Errorf("receiver's error lacks %q", w)
				}
			}
		})
	}
}

// TestFDSenderOutOfDescriptors: a sender with no free descriptor slot
// cannot open the connection; it said after its whole timeout that the
// receiver was "not listening".
func TestFDSenderOutOfDescriptors(t *testing.T) {
	tok, job := NewToken(), NewJobID()
	x, err := NewFDExchange(testEnv(0, 2, tok, job))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	c := startFDChild(t, "low-files", tok, job, "FDX_FREE=0", "FDX_SEND=1")
	c.await(t, "ready")
	got := c.await(t, "send:")
	t.Log(got)
	if !strings.Contains(got, "this process (rank 1) is out of file descriptors") || !strings.Contains(got, "RLIMIT_NOFILE") ||
		strings.Contains(got, "attempts in") {
		t.Errorf("the sender's error does not say at once that it is out of descriptors: %s", got)
	}
}
