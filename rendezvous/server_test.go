package rendezvous

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAddOverflow: an Add past the int64 range is an error naming the key
// and leaves the value as it was (it used to wrap around).
func TestAddOverflow(t *testing.T) {
	_, c := newStore(t)
	ctx := tctx(t, 5*time.Second)
	for i, tc := range []struct {
		start, delta int64
		want         int64 // when it fits
		overflows    bool
	}{
		{math.MaxInt64 - 1, 1, math.MaxInt64, false},
		{math.MaxInt64, 1, 0, true},
		{math.MaxInt64 - 5, 10, 0, true},
		{1, math.MaxInt64, 0, true},
		{math.MaxInt64, math.MinInt64, -1, false},
		{math.MinInt64 + 1, -1, math.MinInt64, false},
		{math.MinInt64, -1, 0, true},
		{-2, math.MinInt64 + 1, 0, true},
		{0, math.MinInt64, math.MinInt64, false},
	} {
		key := fmt.Sprintf("ctr/%d", i)
		if err := c.Set(ctx, key, strconv.AppendInt(nil, tc.start, 10)); err != nil {
			t.Fatal(err)
		}
		got, err := c.Add(ctx, key, tc.delta)
		switch {
		case tc.overflows && (err == nil || !strings.Contains(err.Error(), strconv.Quote(key)) || !strings.Contains(err.Error(), "overflow")):
			t.Errorf("%d + %d: got %d, %v; want an overflow error naming %q", tc.start, tc.delta, got, err, key)
		case !tc.overflows && (err != nil || got != tc.want):
			t.Errorf("%d + %d: got %d, %v; want %d", tc.start, tc.delta, got, err, tc.want)
		}
		want := tc.want
		if tc.overflows {
			want = tc.start
		}
		if v, err := c.Get(ctx, key); err != nil || string(v) != strconv.FormatInt(want, 10) {
			t.Errorf("%d + %d: %q holds %q, %v; want %d", tc.start, tc.delta, key, v, err, want)
		}
	}
}

// TestHandshakeFlood: connections that never present the token hold at
// most maxHandshakes places: those beyond are closed within a moment
// (each used to hold a goroutine and an fd for 10 s, without bound), and a
// real client still gets in and works at once.
func TestHandshakeFlood(t *testing.T) {
	s, _, tok := newStoreToken(t)
	const extra = 16
	closed := make(chan int, maxHandshakes+extra)
	for i := range maxHandshakes + extra {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		go func() {
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			var b [1]byte
			if _, err := conn.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
				closed <- i // by the server (or by the cleanup, after the test)
			}
		}()
	}
	deadline := time.After(3 * time.Second)
	for n := 0; n < extra; n++ {
		select {
		case <-closed:
		case <-deadline:
			t.Fatalf("%d of the %d idle connections beyond the cap of %d closed after 3 s", n, extra, maxHandshakes)
		}
	}
	start := time.Now()
	c, err := Dial(tctx(t, 5*time.Second), s.Addr(), tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := tctx(t, 5*time.Second)
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("get: %q, %v", v, err)
	}
	if d := time.Since(start); d > 5*time.Second { // the handshake timeout (10 s) is what a flood cost before
		t.Fatalf("a real client took %v to connect and work beside the flood", d)
	}
	time.Sleep(50 * time.Millisecond)
	// The ones in the cap stay until their own deadline: at most one more
	// made room for the client.
	if n := len(closed); n > 1 {
		t.Fatalf("%d more idle connections closed, want at most 1", n)
	}
}

// TestHandshakeBurst: hundreds of ranks connecting at once, more than
// maxHandshakes, all get in on their first connection: the cap queues
// them, it does not refuse them. One P makes the server accept faster than
// it serves handshakes.
func TestHandshakeBurst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s, _, tok := newStoreToken(t)
	const n = 6 * maxHandshakes
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			conn, err := net.Dial("tcp", s.Addr())
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			writeMsg(conn, &msg{op: opHello, vals: [][]byte{[]byte(tok)}})
			if r, err := readMsg(conn, maxFrame); err != nil || r.op != respOK {
				errs <- fmt.Errorf("connection %d: hello reply %d, %v", i, r.op, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
