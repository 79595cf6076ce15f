package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"github.com/symmem/symmem/internal/errs"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCallTimeout bounds every Client call, Dial, FDExchange send and
// receive whose ctx has no deadline. It is a bound of this package's
// calls, longer than symmem's default wait for peers (60 s, which Init and
// the backends put on ctx); callers that set a deadline never meet it.
const DefaultCallTimeout = 5 * time.Minute

// Sentinel errors, for errors.Is.
var (
	ErrNotFound     = errors.New("rendezvous: key not found")
	ErrTokenRefused = errors.New("rendezvous: token refused")
	ErrUnreachable  = errors.New("rendezvous: store unreachable")
	ErrTimeout      = errors.New("rendezvous: timed out")
	ErrClosed       = errs.Closed
)

// Client talks to a Server. It is safe for concurrent use: each in-flight
// request holds its own connection (idle ones are reused), so any number of
// goroutines may block in Wait at once.
type Client struct {
	addr, token string

	mu     sync.Mutex
	idle   []net.Conn
	busy   map[net.Conn]struct{}
	closed bool

	failed atomic.Bool // the job failed: Bootstrap's cleanup waits at most failedExit
}

// maxIdle bounds how many idle connections a Client keeps.
const maxIdle = 4

// Dial connects to the store at addr and presents token. The store may not be
// up yet (ranks start at different times): Dial retries until ctx's deadline
// (DefaultCallTimeout without one). A refused token, or an addr that is not
// host:port with a port in 1..65535 (an error wrapping ErrBadEnv), fails at
// once.
func Dial(ctx context.Context, addr, token string) (*Client, error) {
	// No retry can make a malformed address work.
	if _, _, err := splitStoreAddr(addr); err != nil {
		return nil, fmt.Errorf("%w: store address %q %v (check %s, or %s and %s)", ErrBadEnv, addr, err, VarStore, VarMasterAddr, VarStorePort)
	}
	c := &Client{addr: addr, token: token, busy: map[net.Conn]struct{}{}}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.idle = append(c.idle, conn)
	return c, nil
}

func withDefault(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultCallTimeout)
}

// dial opens and authenticates one connection, retrying while the store is
// unreachable.
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	start := time.Now()
	backoff := 10 * time.Millisecond
	var last error
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err == nil {
			if err = c.hello(ctx, conn); err == nil {
				return conn, nil
			}
			conn.Close()
			if errors.Is(err, ErrTokenRefused) {
				return nil, err
			}
			// A reply that is no store's frame: another program holds
			// the port, and no retry turns it into the store.
			if errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isNetErr(err) || errors.Is(err, errForeign) {
				return nil, fmt.Errorf("%w: %s answers, but it is not a symmem store (another program holds that port; check MASTER_ADDR, %s or %s): %w",
					ErrUnreachable, c.addr, VarStore, VarStorePort, err)
			}
		}
		last = err
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: cannot reach the store at %s after %d attempts in %v (is rank 0 or the launcher running, and MASTER_ADDR, SYMMEM_STORE or SYMMEM_PORT right?): %w",
				ErrUnreachable, c.addr, attempt, time.Since(start).Round(time.Millisecond), last)
		case <-t.C:
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

func (c *Client) hello(ctx context.Context, conn net.Conn) error {
	stop := bindCtx(ctx, conn)
	defer stop()
	if err := writeMsg(conn, &msg{op: opHello, vals: [][]byte{[]byte(c.token)}}); err != nil {
		return err
	}
	resp, err := readMsg(conn, maxFrame)
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", c.addr, err)
	}
	switch resp.op {
	case respOK:
		return nil
	case respRefused:
		return refusedError{c.addr}
	}
	return fmt.Errorf("%w: unexpected handshake reply %d from %s", errForeign, resp.op, c.addr)
}

// errForeign marks a handshake reply that no store sends.
var errForeign = errors.New("rendezvous: not a store's reply")

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// bindCtx makes conn's I/O fail when ctx ends; call the result when done.
// The result clears the deadline once the AfterFunc cannot run any more:
// where ctx ended as the call returned, the func runs on its own goroutine
// and could set its past deadline after the reset, leaving the pooled
// conn to fail the next call at once ("i/o timeout").
func bindCtx(ctx context.Context, conn net.Conn) func() {
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	ran := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		conn.SetDeadline(time.Unix(1, 0))
		close(ran)
	})
	return func() {
		if !stop() {
			<-ran // it started: let it finish first
		}
		conn.SetDeadline(time.Time{})
	}
}

// Close closes the client's connections; blocked calls return ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, conn := range c.idle {
		conn.Close()
	}
	c.idle = nil
	for conn := range c.busy {
		conn.Close()
	}
}

// errClientClosed says which client was closed (ErrClosed alone reads
// "closed").
var errClientClosed = fmt.Errorf("rendezvous: the store client is closed: %w", ErrClosed)

func (c *Client) get(ctx context.Context) (net.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClientClosed
	}
	if n := len(c.idle); n > 0 {
		conn := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.busy[conn] = struct{}{}
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, errClientClosed
	}
	c.busy[conn] = struct{}{}
	return conn, nil
}

func (c *Client) put(conn net.Conn, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, conn)
	if ok && !c.closed && len(c.idle) < maxIdle {
		c.idle = append(c.idle, conn)
		return
	}
	conn.Close()
}

// do sends req and returns the response. what names the call in errors.
func (c *Client) do(ctx context.Context, what string, req *msg) (msg, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	conn, err := c.get(ctx)
	if err != nil {
		return msg{}, fmt.Errorf("rendezvous: %s: %w", what, err)
	}
	stop := bindCtx(ctx, conn)
	err = writeMsg(conn, req)
	var resp msg
	if err == nil {
		resp, err = readMsg(conn, maxFrame)
	}
	stop()
	c.put(conn, err == nil)
	if err != nil {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		switch {
		case closed:
			err = errClientClosed
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		case ctx.Err() != nil:
			err = ctx.Err()
		}
		return msg{}, fmt.Errorf("rendezvous: %s at %s: %w", what, c.addr, err)
	}
	if resp.op == respError {
		text := "no message"
		if len(resp.vals) > 0 {
			text = string(resp.vals[0])
		}
		return msg{}, fmt.Errorf("rendezvous: %s: store at %s says: %s", what, c.addr, text)
	}
	return resp, nil
}

func checkKey(key string) error {
	if key == "" {
		return errors.New("rendezvous: empty key: every key needs a name")
	}
	return nil
}

// Set stores val under key, replacing any value, and wakes waiters.
func (c *Client) Set(ctx context.Context, key string, val []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := c.do(ctx, fmt.Sprintf("set %q", key), &msg{op: opSet, keys: []string{key}, vals: [][]byte{val}})
	return err
}

// Get returns the value of key, or an error wrapping ErrNotFound.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, fmt.Sprintf("get %q", key), &msg{op: opGet, keys: []string{key}})
	if err != nil {
		return nil, err
	}
	if resp.op == respNotFound {
		return nil, fmt.Errorf("rendezvous: get %q: %w", key, ErrNotFound)
	}
	if resp.op != respOK || len(resp.vals) != 1 {
		return nil, fmt.Errorf("rendezvous: get %q: unexpected reply %d", key, resp.op)
	}
	return resp.vals[0], nil
}

// Add adds delta to the decimal integer stored at key (absent = 0) and
// returns the new value.
func (c *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	resp, err := c.do(ctx, fmt.Sprintf("add %q", key), &msg{op: opAdd, keys: []string{key}, num: delta})
	if err != nil {
		return 0, err
	}
	return resp.num, nil
}

// CompareSet sets key to new if its value equals old (an empty old matches an
// absent key). It returns the value after the call and whether it swapped.
func (c *Client) CompareSet(ctx context.Context, key string, old, new []byte) ([]byte, bool, error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	resp, err := c.do(ctx, fmt.Sprintf("compare-set %q", key), &msg{op: opCAS, keys: []string{key}, vals: [][]byte{old, new}})
	if err != nil {
		return nil, false, err
	}
	if len(resp.vals) != 1 {
		return nil, false, fmt.Errorf("rendezvous: compare-set %q: malformed reply", key)
	}
	return resp.vals[0], resp.num == 1, nil
}

// Delete removes key; deleting an absent key is not an error.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	_, err := c.do(ctx, fmt.Sprintf("delete %q", key), &msg{op: opDelete, keys: []string{key}})
	return err
}

// Wait blocks until every key exists and returns their values in order. The
// wait runs on the server; when ctx's deadline (DefaultCallTimeout without one)
// passes, the error wraps ErrTimeout and names the keys that never arrived.
func (c *Client) Wait(ctx context.Context, keys ...string) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, errors.New("rendezvous: Wait needs at least one key")
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	d, _ := ctx.Deadline()
	left := time.Until(d)
	if left <= 0 {
		left = time.Millisecond
	}
	// The server times out first and names the missing keys; the connection
	// deadline (ctx) is only the backstop.
	ms := max(int64(left/time.Millisecond)-50, 1)
	what := "wait for " + quoteKeys(keys)
	// Give the connection a little slack past the server-side timeout, but
	// still abort at once if ctx is cancelled.
	wctx, wcancel := context.WithDeadline(context.WithoutCancel(ctx), d.Add(2*time.Second))
	defer wcancel()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			wcancel()
		}
	})
	defer stop()
	resp, err := c.do(wctx, what, &msg{op: opWait, keys: keys, num: ms})
	if err != nil {
		return nil, err
	}
	switch resp.op {
	case respOK:
		if len(resp.vals) != len(keys) {
			return nil, fmt.Errorf("rendezvous: %s: malformed reply", what)
		}
		return resp.vals, nil
	case respTimeout:
		return nil, fmt.Errorf("%w after %v waiting for %d keys; never arrived: %s",
			ErrTimeout, time.Duration(ms)*time.Millisecond, len(keys), quoteKeys(resp.keys))
	}
	return nil, fmt.Errorf("rendezvous: %s: unexpected reply %d", what, resp.op)
}

func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// refusedError reads "rendezvous: store at ADDR refused the token: check
// SYMMEM_TOKEN" and matches ErrTokenRefused.
type refusedError struct{ addr string }

func (e refusedError) Error() string {
	return "rendezvous: store at " + e.addr + " refused the token: check SYMMEM_TOKEN"
}

func (e refusedError) Is(target error) bool { return target == ErrTokenRefused }
