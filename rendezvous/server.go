package rendezvous

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// helloLimit bounds the first frame of a connection, read before the token is
// checked, so an unauthenticated peer cannot make the server allocate much.
const helloLimit = 4096

// Connections that have not presented the token yet: at most maxHandshakes
// at once, so a flood of idle ones cannot hold goroutines and fds without
// bound. A rank sends its hello as it connects; one that idles past
// handshakeGrace gives its place to a newcomer when there is none left.
const (
	maxHandshakes    = 64
	handshakeGrace   = 250 * time.Millisecond
	handshakeTimeout = 10 * time.Second // without pressure
)

// handshake is a connection still owing its hello.
type handshake struct {
	c     net.Conn
	since time.Time // when its reader started waiting for the hello (zero: not yet)
}

// Server is the key-value store. It serves until Close.
type Server struct {
	ln    net.Listener
	token []byte

	mu      sync.Mutex
	data    map[string][]byte
	changed chan struct{} // closed and replaced on every change
	conns   map[net.Conn]struct{}
	authed  int           // connections past the token handshake
	pending []handshake   // connections in the handshake, oldest first
	hsDone  chan struct{} // a handshake ended: room for the acceptor (buffered, 1)
	closed  chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// NewServer listens on addr ("127.0.0.1:0" picks a free loopback port) and
// serves clients presenting token. An empty token is refused: a job always
// has one (see NewToken).
func NewServer(addr, token string) (*Server, error) {
	if token == "" {
		return nil, errors.New("rendezvous: NewServer: empty token: make one with NewToken and pass it to every rank (SYMMEM_TOKEN)")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: store cannot listen on %s: %w", addr, err)
	}
	s := &Server{
		ln:      ln,
		token:   []byte(token),
		data:    map[string][]byte{},
		changed: make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
		hsDone:  make(chan struct{}, 1),
		closed:  make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Addr is the address the server listens on, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, ends blocked waits and closes every connection.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
}

// Drain waits until no authenticated client is connected (or ctx ends), so
// a hosting rank stops the store only after every other rank has read its
// last reply and hung up; clients that never presented the token do not
// hold it up. It reports whether the store drained.
func (s *Server) Drain(ctx context.Context) bool {
	for {
		s.mu.Lock()
		n := s.authed
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(5 * time.Millisecond) // e.g. EMFILE: back off, keep serving
			continue
		}
		if !s.admit(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go s.serve(c)
	}
}

// admit registers c among the connections in the handshake once there is
// room, evicting the oldest if it has idled past handshakeGrace. It reports
// false when the server closed meanwhile.
func (s *Server) admit(c net.Conn) bool {
	for {
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			return false
		default:
		}
		if len(s.pending) == maxHandshakes {
			// The oldest idler: one whose reader has waited past the grace
			// for a hello (a connection whose goroutine has not started
			// reading yet is never taken for idle).
			if i := slices.IndexFunc(s.pending, func(h handshake) bool {
				return !h.since.IsZero() && time.Since(h.since) >= handshakeGrace
			}); i >= 0 {
				s.pending[i].c.Close() // its serve goroutine ends and forgets it
				s.pending = slices.Delete(s.pending, i, i+1)
			}
		}
		if len(s.pending) < maxHandshakes {
			s.pending = append(s.pending, handshake{c: c})
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			return true
		}
		// Queue, not refuse, while the oldest is young: in a startup burst of ranks all are.
		wait := time.NewTimer(handshakeGrace / 5)
		s.mu.Unlock()
		select {
		case <-s.hsDone:
		case <-wait.C:
		case <-s.closed:
		}
		wait.Stop()
	}
}

// reading marks c's reader as started: from now on it can idle.
func (s *Server) reading(c net.Conn) {
	s.mu.Lock()
	if i := slices.IndexFunc(s.pending, func(h handshake) bool { return h.c == c }); i >= 0 {
		s.pending[i].since = time.Now()
	}
	s.mu.Unlock()
}

// handshook removes c from the connections in the handshake.
func (s *Server) handshook(c net.Conn) {
	s.mu.Lock()
	s.pending = slices.DeleteFunc(s.pending, func(h handshake) bool { return h.c == c })
	s.mu.Unlock()
	select {
	case s.hsDone <- struct{}{}:
	default:
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	// Handshake: the first frame must present the token, within
	// handshakeTimeout; at the cap a newcomer may close this connection
	// once it has waited handshakeGrace (admit).
	s.reading(c)
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	hello, err := readMsg(c, helloLimit)
	s.handshook(c)
	if err != nil {
		return
	}
	if hello.op != opHello || len(hello.vals) != 1 ||
		subtle.ConstantTimeCompare(hello.vals[0], s.token) != 1 {
		writeMsg(c, &msg{op: respRefused})
		return
	}
	s.mu.Lock()
	s.authed++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.authed--
		s.mu.Unlock()
	}()
	if err := writeMsg(c, &msg{op: respOK}); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var present *msg // this connection is a rank's presence (opPresence)
	defer func() {
		if present != nil {
			s.gone(present)
		}
	}()
	for {
		req, err := readMsg(c, maxFrame)
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				writeMsg(c, &msg{op: respError, vals: [][]byte{[]byte(err.Error())}})
			}
			return
		}
		var resp msg
		switch req.op {
		case opPresence:
			if len(req.keys) != 2 || len(req.vals) != 1 {
				resp = errResp("presence needs its key, the first-gone key and a value; got %d keys, %d values", len(req.keys), len(req.vals))
				break
			}
			present, resp = &req, msg{op: respOK}
		case opLeave:
			present, resp = nil, msg{op: respOK}
		case opWait:
			var ok bool
			if resp, ok = s.wait(c, &req); !ok {
				return // the client hung up mid-wait
			}
		default:
			resp = s.handle(&req)
		}
		if err := writeMsg(c, &resp); err != nil {
			return
		}
	}
}

// gone records that presence p's connection ended without opLeave: its
// process exited (or lost the network). Its key gets its value, and so
// does the next entry of its gone list (GoneKey(list, n), n counted in the
// list's key). Nothing while the server closes (every connection ends
// then).
func (s *Server) gone(p *msg) {
	select {
	case <-s.closed:
		return
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[p.keys[0]] = p.vals[0]
	n, _ := strconv.Atoi(string(s.data[p.keys[1]])) // absent: 0
	n++
	s.data[p.keys[1]] = strconv.AppendInt(nil, int64(n), 10)
	s.data[GoneKey(p.keys[1], n)] = p.vals[0]
	s.notifyLocked()
}

func errResp(format string, a ...any) msg {
	return msg{op: respError, vals: [][]byte{fmt.Appendf(nil, format, a...)}}
}

// handle executes one request and returns its response.
func (s *Server) handle(r *msg) msg {
	if len(r.keys) != 1 {
		return errResp("op %d needs exactly one key, got %d", r.op, len(r.keys))
	}
	key := r.keys[0]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.op {
	case opSet:
		if len(r.vals) != 1 {
			return errResp("set %q needs one value, got %d", key, len(r.vals))
		}
		s.data[key] = r.vals[0]
		s.notifyLocked()
		return msg{op: respOK}
	case opGet:
		v, ok := s.data[key]
		if !ok {
			return msg{op: respNotFound}
		}
		return msg{op: respOK, vals: [][]byte{v}}
	case opAdd:
		var cur int64
		if v, ok := s.data[key]; ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return errResp("add %q: current value %q is not a decimal integer", key, v)
			}
			cur = n
		}
		sum := cur + r.num
		if (r.num > 0 && sum < cur) || (r.num < 0 && sum > cur) { // wrapped around: a counter must never jump sign
			return errResp("add %q: %d + %d overflows int64; the value stays %d", key, cur, r.num, cur)
		}
		cur = sum
		s.data[key] = strconv.AppendInt(nil, cur, 10)
		s.notifyLocked()
		return msg{op: respOK, num: cur}
	case opCAS:
		if len(r.vals) != 2 {
			return errResp("compare-set %q needs old and new values, got %d values", key, len(r.vals))
		}
		v, ok := s.data[key]
		if (!ok && len(r.vals[0]) == 0) || (ok && bytes.Equal(v, r.vals[0])) {
			s.data[key] = r.vals[1]
			s.notifyLocked()
			return msg{op: respOK, num: 1, vals: [][]byte{r.vals[1]}}
		}
		return msg{op: respOK, num: 0, vals: [][]byte{v}}
	case opDelete:
		delete(s.data, key)
		s.notifyLocked()
		return msg{op: respOK}
	}
	return errResp("unknown op %d", r.op)
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait blocks until every key exists, the request's timeout passes or the
// server closes. ok is false when the client hung up meanwhile (a cancelled
// Wait closes its connection): the caller drops the connection at once
// rather than holding its goroutine, socket and place in Drain until the
// timeout.
func (s *Server) wait(c net.Conn, r *msg) (resp msg, ok bool) {
	if len(r.keys) == 0 {
		return errResp("wait needs at least one key"), true
	}
	if r.num <= 0 {
		return errResp("wait needs a positive timeout, got %d ms", r.num), true
	}
	timer := time.NewTimer(time.Duration(r.num) * time.Millisecond)
	defer timer.Stop()
	var hungUp <-chan struct{} // watched only once the wait blocks
	for {
		s.mu.Lock()
		var missing []string
		vals := make([][]byte, len(r.keys))
		for i, k := range r.keys {
			v, have := s.data[k]
			if !have {
				missing = append(missing, k)
			}
			vals[i] = v
		}
		ch := s.changed
		s.mu.Unlock()
		if len(missing) == 0 {
			return msg{op: respOK, vals: vals}, true
		}
		if hungUp == nil {
			var stop func() bool
			hungUp, stop = watchHangup(c)
			defer func() {
				if !stop() {
					ok = false
				}
			}()
		}
		select {
		case <-ch:
		case <-hungUp:
			return msg{}, false
		case <-timer.C:
			return msg{op: respTimeout, keys: missing}, true
		case <-s.closed:
			return errResp("store is shutting down"), true
		}
	}
}

// watchHangup reads c while the server owes it a reply: the protocol is
// strict request/reply, so the read ends only when the client hangs up (or
// breaks the protocol), and the returned channel is then closed. stop ends
// the watch and reports whether c is still good to serve.
func watchHangup(c net.Conn) (hungUp <-chan struct{}, stop func() bool) {
	done := make(chan struct{})
	var err error
	go func() {
		var b [1]byte
		_, err = c.Read(b[:])
		close(done)
	}()
	return done, func() bool {
		c.SetReadDeadline(time.Unix(1, 0)) // unblock the read
		<-done
		c.SetReadDeadline(time.Time{})
		return errors.Is(err, os.ErrDeadlineExceeded)
	}
}
