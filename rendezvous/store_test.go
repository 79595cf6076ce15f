package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func newStore(t *testing.T) (*Server, *Client) {
	t.Helper()
	s, c, _ := newStoreToken(t)
	return s, c
}

// newStoreToken is newStore with the job token, for a child process.
func newStoreToken(t *testing.T) (*Server, *Client, string) {
	t.Helper()
	tok := NewToken()
	s, err := NewServer("127.0.0.1:0", tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, s.Addr(), tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c, tok
}

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStoreOps(t *testing.T) {
	_, c := newStore(t)
	ctx := tctx(t, 5*time.Second)
	steps := []struct {
		name string
		run  func() (string, error)
		want string
		err  error
	}{
		{"get missing", func() (string, error) { v, err := c.Get(ctx, "k"); return string(v), err }, "", ErrNotFound},
		{"set", func() (string, error) { return "", c.Set(ctx, "k", []byte("v1")) }, "", nil},
		{"get", func() (string, error) { v, err := c.Get(ctx, "k"); return string(v), err }, "v1", nil},
		{"set empty", func() (string, error) { return "", c.Set(ctx, "e", nil) }, "", nil},
		{"get empty", func() (string, error) { v, err := c.Get(ctx, "e"); return string(v), err }, "", nil},
		{"add new", func() (string, error) { n, err := c.Add(ctx, "n", 5); return fmt.Sprint(n), err }, "5", nil},
		{"add neg", func() (string, error) { n, err := c.Add(ctx, "n", -7); return fmt.Sprint(n), err }, "-2", nil},
		{"add reads back", func() (string, error) { v, err := c.Get(ctx, "n"); return string(v), err }, "-2", nil},
		{"add non-number", func() (string, error) { _, err := c.Add(ctx, "k", 1); return "", err }, "", errAny},
		{"cas wrong old", func() (string, error) {
			v, ok, err := c.CompareSet(ctx, "k", []byte("nope"), []byte("v2"))
			return fmt.Sprintf("%s %v", v, ok), err
		}, "v1 false", nil},
		{"cas right old", func() (string, error) {
			v, ok, err := c.CompareSet(ctx, "k", []byte("v1"), []byte("v2"))
			return fmt.Sprintf("%s %v", v, ok), err
		}, "v2 true", nil},
		{"cas absent empty old", func() (string, error) {
			v, ok, err := c.CompareSet(ctx, "fresh", nil, []byte("x"))
			return fmt.Sprintf("%s %v", v, ok), err
		}, "x true", nil},
		{"wait present", func() (string, error) {
			v, err := c.Wait(ctx, "k", "fresh")
			if err != nil {
				return "", err
			}
			return string(v[0]) + "," + string(v[1]), nil
		}, "v2,x", nil},
		{"delete", func() (string, error) { return "", c.Delete(ctx, "k") }, "", nil},
		{"get deleted", func() (string, error) { v, err := c.Get(ctx, "k"); return string(v), err }, "", ErrNotFound},
		{"delete absent", func() (string, error) { return "", c.Delete(ctx, "k") }, "", nil},
		{"empty key", func() (string, error) { return "", c.Set(ctx, "", nil) }, "", errAny},
	}
	for _, s := range steps {
		got, err := s.run()
		switch {
		case s.err == errAny && err == nil:
			t.Fatalf("%s: want an error", s.name)
		case s.err != nil && s.err != errAny && !errors.Is(err, s.err):
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.err)
		case s.err == nil && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.err == nil && got != s.want:
			t.Fatalf("%s: got %q want %q", s.name, got, s.want)
		}
	}
}

var errAny = errors.New("any error")

func TestTokenRefused(t *testing.T) {
	s, _ := newStore(t)
	_, err := Dial(tctx(t, 5*time.Second), s.Addr(), "wrong-token")
	if !errors.Is(err, ErrTokenRefused) {
		t.Fatalf("err = %v, want ErrTokenRefused", err)
	}
	want := "rendezvous: store at " + s.Addr() + " refused the token: check SYMMEM_TOKEN"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err %q does not contain %q", err, want)
	}
	// A raw connection that skips the handshake gets nothing done either.
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	writeMsg(conn, &msg{op: opSet, keys: []string{"x"}, vals: [][]byte{nil}})
	if r, err := readMsg(conn, maxFrame); err != nil || r.op != respRefused {
		t.Fatalf("set without hello: reply %+v, %v; want refused", r, err)
	}
}

func TestWaitTimeoutNamesKeys(t *testing.T) {
	_, c := newStore(t)
	ctx := tctx(t, 5*time.Second)
	if err := c.Set(ctx, "rank/0", []byte("here")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Wait(tctx(t, 300*time.Millisecond), "rank/0", "rank/1", "rank/2")
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("timeout took %v", el)
	}
	msg := err.Error()
	if !strings.Contains(msg, `"rank/1", "rank/2"`) || strings.Contains(msg, `"rank/0"`) {
		t.Fatalf("error should name exactly the missing keys: %v", err)
	}
	// The client is still usable afterwards.
	if _, err := c.Get(ctx, "rank/0"); err != nil {
		t.Fatal(err)
	}
}

func TestWaitCancel(t *testing.T) {
	_, c := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Wait(ctx, "never")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 3*time.Second {
		t.Fatalf("cancelled wait: err = %v after %v", err, time.Since(start))
	}
}

// TestWaitHangup: the server notices a client hanging up in the middle of
// a wait (a cancelled Wait closes its connection) and drops the connection
// at once, so Drain does not wait out the wait's timeout for a client that
// is gone. Waits that block and then end, by the key or by their timeout,
// leave the connection serving.
func TestWaitHangup(t *testing.T) {
	s, c := newStore(t)
	ctx := tctx(t, 10*time.Second)
	conns := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	}
	time.AfterFunc(100*time.Millisecond, func() { c.Set(ctx, "late", []byte("v")) }) // on a second connection
	if v, err := c.Wait(ctx, "late"); err != nil || string(v[0]) != "v" {
		t.Fatalf("blocked wait: %q, %v", v, err)
	}
	n := conns()
	if _, err := c.Wait(tctx(t, 200*time.Millisecond), "never"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("wait past its timeout: err = %v, want ErrTimeout", err)
	}
	if _, err := c.Get(ctx, "late"); err != nil || conns() != n {
		t.Fatalf("after blocked waits: get %v, %d server connections, want %d still serving", err, conns(), n)
	}

	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Wait(wctx, "never"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: err = %v", err)
	}
	c.Close()
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer dcancel()
	start := time.Now()
	if !s.Drain(dctx) {
		t.Fatalf("Drain gave up after %v: %d server connection(s) left after the only client cancelled its wait and closed",
			time.Since(start).Round(time.Millisecond), conns())
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Drain took %v", d)
	}
}

func TestConcurrentWaiters(t *testing.T) {
	_, c := newStore(t)
	ctx := tctx(t, 10*time.Second)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Wait(ctx, fmt.Sprintf("k%d", i), "go")
			if err == nil && string(v[0]) != fmt.Sprint(i) {
				err = fmt.Errorf("waiter %d got %q", i, v[0])
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	for i := range n {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, "go", nil); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentAdd(t *testing.T) {
	_, c := newStore(t)
	ctx := tctx(t, 10*time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := c.Add(ctx, "ctr", 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if v, err := c.Get(ctx, "ctr"); err != nil || string(v) != "400" {
		t.Fatalf("ctr = %q, %v; want 400", v, err)
	}
}

func TestBarrier(t *testing.T) {
	s, _ := newStore(t)
	tok := s.token
	ctx := tctx(t, 10*time.Second)
	const n = 4
	for round := range 3 { // the same name is reusable
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := Dial(ctx, s.Addr(), string(tok))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				if err := c.Barrier(ctx, "b", n); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			}()
		}
		wg.Wait()
	}
	_, c := newStore(t)
	err := c.Barrier(tctx(t, 200*time.Millisecond), "lonely", 3)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "only 1 of 3 participants arrived") {
		t.Fatalf("err = %v", err)
	}
}

// TestBarrierWithdraw: a participant whose wait fails takes its arrival
// back, so later rounds of the name still need all n (a timed-out arrival
// used to stay counted: the next round's first arriver passed alone). One
// whose wait fails after the n-th arrival passes: the round is complete.
func TestBarrierWithdraw(t *testing.T) {
	s, c := newStore(t)
	ctx := tctx(t, 10*time.Second)
	timeout := func() context.Context { return tctx(t, 200*time.Millisecond) }
	cancelled := func() context.Context { // while it waits
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		return ctx
	}
	fails := []struct {
		ctx  func() context.Context
		want error
		text string
	}{
		{timeout, ErrTimeout, "only 1 of 2 participants arrived"},
		{timeout, ErrTimeout, "only 1 of 2 participants arrived"},
		{cancelled, context.Canceled, ""},
		{timeout, ErrTimeout, "only 1 of 2 participants arrived"},
	}
	for i, f := range fails {
		if err := c.Barrier(f.ctx(), "b", 2); !errors.Is(err, f.want) || !strings.Contains(err.Error(), f.text) {
			t.Fatalf("round %d alone: err = %v, want %v %q", i, err, f.want, f.text)
		}
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if err := c.Barrier(done, "b", 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("barrier with an ended ctx: err = %v", err) // and it does not arrive
	}
	for round := range 2 { // the name still works, and needs both
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := Dial(ctx, s.Addr(), string(s.token))
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				if err := c.Barrier(ctx, "b", 2); err != nil {
					t.Errorf("round %d of two: %v", round, err)
				}
			}()
		}
		wg.Wait()
	}
	if v, err := c.Get(ctx, "symmem/barrier/b/count"); err != nil || string(v) != "4" {
		t.Fatalf("count %q, %v; want 4: two rounds of two, every failed arrival withdrawn", v, err)
	}

	// The second arrival is counted but its done key never set (its Set
	// failed): the first's wait times out, yet all arrived.
	time.AfterFunc(100*time.Millisecond, func() { c.Add(ctx, "symmem/barrier/late/count", 1) })
	if err := c.Barrier(tctx(t, 300*time.Millisecond), "late", 2); err != nil {
		t.Fatalf("barrier whose wait failed after both arrived: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Dial(tctx(t, 300*time.Millisecond), addr, "tok")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want ErrUnreachable naming %s", err, addr)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("Dial should retry until the deadline, took %v", el)
	}
}

// TestDialBadAddress: an address no retry can make work fails at once, as
// a bad environment, instead of being retried until the deadline and
// reported unreachable.
func TestDialBadAddress(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:port", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:99999", "nohostport", "[127.0.0.1:29500]:29501"} {
		start := time.Now()
		_, err := Dial(tctx(t, 5*time.Second), addr, "tok")
		if !errors.Is(err, ErrBadEnv) || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), fmt.Sprintf("%q", addr)) {
			t.Errorf("Dial(%q): err = %v, want ErrBadEnv naming the address", addr, err)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Dial(%q) took %v", addr, el)
		}
	}
}

func TestDialRetriesUntilStoreStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tok := NewToken()
	srv := make(chan *Server, 1)
	time.AfterFunc(200*time.Millisecond, func() {
		s, err := NewServer(addr, tok)
		if err != nil {
			t.Error(err)
		}
		srv <- s
	})
	c, err := Dial(tctx(t, 5*time.Second), addr, tok)
	s := <-srv
	if s != nil {
		defer s.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestServerCloseEndsWaits(t *testing.T) {
	s, c := newStore(t)
	done := make(chan error, 1)
	go func() { _, err := c.Wait(tctx(t, 10*time.Second), "never"); done <- err }()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("wait succeeded on a closed server")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("wait still blocked after server Close")
	}
}

func TestNewServerBadInput(t *testing.T) {
	if _, err := NewServer("127.0.0.1:0", ""); err == nil {
		t.Fatal("empty token accepted")
	}
	if _, err := NewServer("256.0.0.1:1", "t"); err == nil {
		t.Fatal("bad address accepted")
	}
}

func TestMalformedFrameOverSocket(t *testing.T) {
	s, c := newStore(t)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	writeMsg(conn, &msg{op: opHello, vals: [][]byte{s.token}})
	if r, err := readMsg(conn, maxFrame); err != nil || r.op != respOK {
		t.Fatalf("hello: %+v %v", r, err)
	}
	conn.Write([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5}) // body too short
	r, err := readMsg(conn, maxFrame)
	if err != nil || r.op != respError || !strings.Contains(string(r.vals[0]), "malformed") {
		t.Fatalf("garbage frame: reply %+v, %v", r, err)
	}
	// The server keeps serving everyone else.
	if err := c.Set(tctx(t, 5*time.Second), "still", []byte("up")); err != nil {
		t.Fatal(err)
	}
}

func TestClientCloseEndsWaits(t *testing.T) {
	_, c := newStore(t)
	done := make(chan error, 1)
	go func() { _, err := c.Wait(tctx(t, 10*time.Second), "never"); done <- err }()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("wait still blocked after client Close")
	}
	if err := c.Set(context.Background(), "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("set after close: %v", err)
	}
}

// AllGather through the store: every member gets every value by index, and
// the last one out leaves no keys behind.
func TestClientAllGather(t *testing.T) {
	srv, err := NewServer("127.0.0.1:0", "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ranks := []int{0, 2, 5}
	out := make([][][]byte, len(ranks))
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Dial(ctx, srv.Addr(), "tok")
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			out[i], errs[i] = c.AllGather(ctx, "g/ag/0", ranks, i, []byte{byte(10 + i)})
		}()
	}
	wg.Wait()
	for i := range ranks {
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
		for j, v := range out[i] {
			if len(v) != 1 || v[0] != byte(10+j) {
				t.Fatalf("member %d got %v from member %d", i, v, j)
			}
		}
	}
	c, _ := Dial(ctx, srv.Addr(), "tok")
	defer c.Close()
	for _, k := range []string{"g/ag/0/0", "g/ag/0/1", "g/ag/0/2", "g/ag/0/done"} {
		if _, err := c.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Errorf("key %q left behind (%v)", k, err)
		}
	}
	// A member that never arrives is named.
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	_, err = c.AllGather(sctx, "g/ag/1", ranks, 0, []byte{1})
	if err == nil || !strings.Contains(err.Error(), "rank(s) 2, 5") {
		t.Fatalf("AllGather with absent members = %v, want an error naming ranks 2, 5", err)
	}
	// A watch that finds a member gone ends the wait with its own error,
	// long before ctx would; one that finds nothing ends with the wait.
	gone := errors.New("rank 2 exited")
	t0 := time.Now()
	_, err = c.AllGatherWatched(ctx, "g/ag/2", ranks, 0, []byte{1}, func(ctx context.Context, keys []string) error {
		if len(keys) != 3 || keys[1] != "g/ag/2/1" {
			return fmt.Errorf("watch got keys %v", keys)
		}
		time.Sleep(20 * time.Millisecond)
		return gone
	})
	if err != gone || time.Since(t0) > 2*time.Second {
		t.Fatalf("AllGatherWatched with a failing watch = %v after %v, want the watch's error at once", err, time.Since(t0))
	}
	quiet := func(ctx context.Context, keys []string) error { <-ctx.Done(); return nil }
	_, err = c.AllGatherWatched(ctx, "g/ag/3", []int{0}, 0, []byte{7}, quiet)
	if err != nil {
		t.Fatalf("AllGatherWatched of one member with a quiet watch: %v", err)
	}
}

// TestPresence: a presence that ends without Leave sets its key and the
// next entry of the gone list; one that leaves sets nothing; Lost tells a
// rank that the store went away.
func TestPresence(t *testing.T) {
	ctx := tctx(t, 10*time.Second)
	srv, c := newStore(t)
	const list = "job/presence/gone"
	var ps []*Presence
	for r := range 3 {
		p, err := c.Announce(ctx, fmt.Sprintf("job/presence/%d", r), list, []byte(fmt.Sprintf("rank %d exited", r)))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := ps[0].Leave(); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if err := ps[0].Leave(); err != nil {
		t.Fatalf("second leave: %v", err)
	}
	if _, err := c.Get(ctx, "job/presence/0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a rank that left is marked gone: %v", err)
	}
	start := time.Now()
	ps[2].conn.Close() // as the kernel does when the process dies
	vals, err := c.Wait(ctx, GoneKey(list, 1))
	if err != nil || string(vals[0]) != "rank 2 exited" {
		t.Fatalf("first gone: %q, %v", vals, err)
	}
	t.Logf("rank 2's end seen after %v", time.Since(start))
	ps[1].conn.Close()
	if vals, err := c.Wait(ctx, "job/presence/1", GoneKey(list, 2)); err != nil || string(vals[0]) != "rank 1 exited" || string(vals[1]) != "rank 1 exited" {
		t.Fatalf("rank 1: %q, %v", vals, err)
	}
	if v, _ := c.Get(ctx, GoneKey(list, 1)); string(v) != "rank 2 exited" {
		t.Fatalf("the first entry changed to %q", v)
	}
	if v, _ := c.Get(ctx, list); string(v) != "2" {
		t.Fatalf("the gone list counts %q, want 2", v)
	}
	// The store goes away: a standing presence learns it.
	p, err := c.Announce(ctx, "job/presence/9", list, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	select {
	case <-p.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the presence did not see the store close")
	}
	if err := p.Leave(); err != nil {
		t.Fatalf("leave after the store closed: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if _, err := c.Announce(short, "k", "f", nil); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("announce to a closed store: %v, want ErrUnreachable", err)
	}
}

// TestPresenceProcessExit: a real child process announces and exits
// without leaving (os.Exit, as a crash would); the store marks it gone at
// once (within a second), naming it.
func TestPresenceProcessExit(t *testing.T) {
	ctx := tctx(t, 20*time.Second)
	srv, c, tok := newStoreToken(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleVar+"=presence", "SYMMEM_TEST_STORE="+srv.Addr(), "SYMMEM_TOKEN="+tok)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	exited := time.Now()
	vals, err := c.Wait(ctx, GoneKey("job/presence/gone", 1))
	if err != nil || string(vals[0]) != "rank 5 exited" {
		t.Fatalf("first gone: %q, %v", vals, err)
	}
	if d := time.Since(exited); d > time.Second {
		t.Fatalf("the exit was seen after %v, want < 1 s", d)
	}
}
