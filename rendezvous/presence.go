package rendezvous

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// A Presence is a rank's standing connection to the store: while it is
// open the rank is there. When it ends without Leave — the process exited
// or was killed (the kernel closes its sockets), or its host dropped off
// the network — the store sets the rank's key to the value the rank gave
// and appends the value to the job's gone list: entry n (GoneKey(list, n),
// from 1) is the n-th rank gone. Peers on any host wait for the next entry
// (Wait) and learn within a round trip who left. The other way, Lost
// reports that the store itself is gone (the rank hosting it exited).
// Peers on one host have pidfds for this; the presence is what reaches
// across hosts.
type Presence struct {
	conn net.Conn
	lost chan struct{}
	once sync.Once
	mu   sync.Mutex // serializes Leave with itself
	left bool
}

// GoneKey is entry n (from 1) of gone list list.
func GoneKey(list string, n int) string { return list + "/" + strconv.Itoa(n) }

// Announce opens this rank's presence: if its connection ends without
// Leave, the store sets key to value and appends value to gone list list.
// It uses a connection of its own, never pooled.
func (c *Client) Announce(ctx context.Context, key, list string, value []byte) (*Presence, error) {
	ctx, cancel := withDefault(ctx)
	defer cancel()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("rendezvous: announce %q: %w", key, errClientClosed)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: announce %q: %w", key, err)
	}
	stop := bindCtx(ctx, conn)
	err = writeMsg(conn, &msg{op: opPresence, keys: []string{key, list}, vals: [][]byte{value}})
	var resp msg
	if err == nil {
		resp, err = readMsg(conn, maxFrame)
	}
	stop()
	if err == nil && resp.op != respOK {
		text := fmt.Sprintf("reply %d", resp.op)
		if resp.op == respError && len(resp.vals) > 0 {
			text = string(resp.vals[0])
		}
		err = fmt.Errorf("store at %s says: %s", c.addr, text)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rendezvous: announce %q: %w", key, err)
	}
	p := &Presence{conn: conn, lost: make(chan struct{})}
	go p.watch()
	return p, nil
}

// watch waits for the store to end the connection: the server writes
// nothing on it unasked, so any read result is its end (or Leave's reply,
// after which Leave closes it).
func (p *Presence) watch() {
	var b [1]byte
	p.conn.Read(b[:])
	p.once.Do(func() { close(p.lost) })
}

// Lost is closed when the presence's connection ended: the store went
// away (its host exited), or Leave ran.
func (p *Presence) Lost() <-chan struct{} { return p.lost }

// presenceLeaveWait bounds Leave's round trip: a store that does not answer
// in that time is gone anyway.
const presenceLeaveWait = 2 * time.Second

// Leave ends the presence cleanly (the store sets nothing) and closes its
// connection. A second call does nothing.
func (p *Presence) Leave() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left {
		return nil
	}
	p.left = true
	defer p.conn.Close()
	select {
	case <-p.lost:
		return nil // the store is gone: nothing to tell it
	default:
	}
	p.conn.SetDeadline(time.Now().Add(presenceLeaveWait))
	if err := writeMsg(p.conn, &msg{op: opLeave}); err != nil {
		return fmt.Errorf("rendezvous: leave: %w", err)
	}
	// watch reads the reply (or the end): wait for it, so the store has
	// cleared the presence before this rank goes on to exit.
	select {
	case <-p.lost:
	case <-time.After(presenceLeaveWait):
		return fmt.Errorf("rendezvous: leave: no reply from the store within %v", presenceLeaveWait)
	}
	return nil
}
