package rendezvous

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// MaxFDs is the most descriptors one Send may carry (the kernel's SCM_MAX_FD).
const MaxFDs = 253

// opFDs is the FDExchange message: num = from<<32 | nfds, keys[0] = tag,
// vals[0] = token.
const opFDs byte = 50

// FDExchange passes file descriptors between the ranks of one host. Each rank
// listens on the abstract Unix socket "@symmem-<jobid>-<rank>"; a background
// loop accepts senders, checks that the peer runs as the same uid
// (SO_PEERCRED) and carries the job token, and files the descriptors in a
// mailbox keyed by (sender, tag) until Recv claims them.
type FDExchange struct {
	env Env
	ln  *net.UnixListener
	uid int

	mu      sync.Mutex
	box     map[mailKey][][]int
	dropped map[mailKey]bool  // Discard: what arrives under these is closed, not filed
	started map[int]bool      // ranks known to have created their exchange (Started, a message from them, a dial that connected)
	failed  map[mailKey]error // what arrived under these could not be taken (out of descriptors): Recv returns it
	spare   int               // acceptLoop's own (not under mu): a descriptor it gives up to accept a sender when the process has none left (-1: none)
	changed chan struct{}
	conns   map[*net.UnixConn]struct{}
	closed  bool
	done    chan struct{}
	wg      sync.WaitGroup
}

type mailKey struct {
	from int
	tag  string
}

// SocketName is the abstract socket name rank listens on in job jobID.
func SocketName(jobID string, rank int) string {
	return fmt.Sprintf("@symmem-%s-%d", jobID, rank)
}

// NewFDExchange starts this rank's listener. e needs Rank, WorldSize, Token
// and JobID.
func NewFDExchange(e Env) (*FDExchange, error) {
	switch {
	case e.JobID == "":
		return nil, fmt.Errorf("%w: fd exchange needs SYMMEM_JOB_ID", ErrBadEnv)
	case e.Token == "":
		return nil, fmt.Errorf("%w: fd exchange needs SYMMEM_TOKEN", ErrBadEnv)
	case e.WorldSize <= 0 || e.Rank < 0 || e.Rank >= e.WorldSize:
		return nil, fmt.Errorf("%w: fd exchange: rank %d of world size %d", ErrBadEnv, e.Rank, e.WorldSize)
	}
	name := SocketName(e.JobID, e.Rank)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("rendezvous: fd exchange: rank %d cannot listen on %s (another process of job %s with the same rank?): %w",
			e.Rank, name, e.JobID, err)
	}
	x := &FDExchange{
		env: e, ln: ln, uid: os.Getuid(),
		box:     map[mailKey][][]int{},
		dropped: map[mailKey]bool{},
		started: map[int]bool{},
		failed:  map[mailKey]error{},
		spare:   openSpare(),
		changed: make(chan struct{}),
		conns:   map[*net.UnixConn]struct{}{},
		done:    make(chan struct{}),
	}
	x.wg.Add(1)
	go x.acceptLoop()
	return x, nil
}

// Close stops the listener and closes every received descriptor that no Recv
// claimed. Blocked Recv calls return ErrClosed.
func (x *FDExchange) Close() {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return
	}
	x.closed = true
	close(x.done)
	x.ln.Close()
	for c := range x.conns {
		c.Close()
	}
	x.mu.Unlock()
	x.wg.Wait()
	if x.spare >= 0 {
		unix.Close(x.spare)
		x.spare = -1
	}
	x.mu.Lock()
	for k, q := range x.box {
		for _, fds := range q {
			closeFDs(fds)
		}
		delete(x.box, k)
	}
	x.mu.Unlock()
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fdAdvice is what a rank out of file descriptors can do.
const fdAdvice = "raise its limit (ulimit -n) or hold fewer segments"

// fdLimit is this process's RLIMIT_NOFILE (0 if unknown).
func fdLimit() uint64 {
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// openSpare opens the descriptor acceptLoop keeps in reserve (-1 if it
// cannot).
func openSpare() int {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func (x *FDExchange) acceptLoop() {
	defer x.wg.Done()
	for {
		if x.spare < 0 {
			x.spare = openSpare()
		}
		c, err := x.ln.AcceptUnix()
		if err != nil {
			select {
			case <-x.done:
				return
			default:
			}
			// Out of descriptors: give up the spare to accept the sender,
			// so that it hears why (receive: the descriptors do not fit
			// either) instead of waiting for an answer until its timeout.
			if (errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)) && x.spare >= 0 {
				unix.Close(x.spare)
				x.spare = -1
				c, err = x.ln.AcceptUnix()
			}
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
		}
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			c.Close()
			return
		}
		x.conns[c] = struct{}{}
		x.wg.Add(1)
		x.mu.Unlock()
		go func() {
			defer x.wg.Done()
			x.receive(c)
			c.Close()
			x.mu.Lock()
			delete(x.conns, c)
			x.mu.Unlock()
		}()
	}
}

// peerUID returns the uid of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// receive handles one sender: read message + rights, check, file, reply.
func (x *FDExchange) receive(c *net.UnixConn) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fds, m, trunc, err := readFDMsg(c)
	reply := func(op byte, text string) {
		r := msg{op: op}
		if text != "" {
			r.vals = [][]byte{[]byte(text)}
		}
		writeMsg(c, &r)
	}
	if err != nil {
		closeFDs(fds)
		reply(respError, err.Error())
		return
	}
	if uid, err := peerUID(c); err != nil || uid != x.uid {
		closeFDs(fds)
		reply(respRefused, fmt.Sprintf("peer uid %d is not this rank's uid %d", uid, x.uid))
		return
	}
	if m.op != opFDs || len(m.vals) != 1 || len(m.keys) != 1 ||
		subtle.ConstantTimeCompare(m.vals[0], []byte(x.env.Token)) != 1 {
		closeFDs(fds)
		reply(respRefused, "token refused: check SYMMEM_TOKEN")
		return
	}
	from, n := int(m.num>>32), int(uint32(m.num))
	if trunc && from >= 0 && from < x.env.WorldSize {
		// The kernel installs the descriptors it can and drops the rest
		// (MSG_CTRUNC): this process has no free slot for them.
		closeFDs(fds)
		err := fmt.Errorf("rank %d's process is out of file descriptors: it could take %d of the %d descriptors rank %d sent (RLIMIT_NOFILE %d): %s: %w",
			x.env.Rank, len(fds), n, from, fdLimit(), fdAdvice, unix.EMFILE)
		x.mu.Lock()
		if k := (mailKey{from, m.keys[0]}); !x.closed && !x.dropped[k] {
			x.failed[k] = err
			close(x.changed)
			x.changed = make(chan struct{})
		}
		x.mu.Unlock()
		reply(respError, err.Error())
		return
	}
	if from < 0 || from >= x.env.WorldSize || n != len(fds) {
		closeFDs(fds)
		reply(respError, fmt.Sprintf("bad header: from rank %d (world size %d), %d descriptors announced, %d received",
			from, x.env.WorldSize, n, len(fds)))
		return
	}
	k := mailKey{from, m.keys[0]}
	x.mu.Lock()
	closed := x.closed
	x.started[from] = true // it sends from an exchange of its own, so it listened
	x.mu.Unlock()
	if closed {
		closeFDs(fds)
		reply(respError, "receiver is closing")
		return
	}
	// The reply goes first: once the descriptors are in the mailbox a Recv
	// may return them and its process Close (which cuts this connection)
	// or exit, and the sender would read EOF instead of its answer.
	reply(respOK, "")
	x.mu.Lock()
	if x.closed || x.dropped[k] { // nobody will claim them
		x.mu.Unlock()
		closeFDs(fds)
		return
	}
	x.box[k] = append(x.box[k], fds)
	close(x.changed)
	x.changed = make(chan struct{})
	x.mu.Unlock()
}

// readFDMsg reads one framed message and the descriptors attached to it;
// trunc: the kernel dropped some of them (MSG_CTRUNC). The returned fds are
// valid even when err is not nil (the caller closes them).
func readFDMsg(c *net.UnixConn) (fds []int, m msg, trunc bool, err error) {
	buf := make([]byte, helloLimit)
	oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if oobn > 0 {
		scms, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for i := range scms {
				if got, e := unix.ParseUnixRights(&scms[i]); e == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	if err != nil {
		return fds, msg{}, false, fmt.Errorf("read: %w", err)
	}
	// The buffer holds MaxFDs, the most a sender can attach: a truncation
	// is the kernel's, out of slots in this process (receive says so).
	m, err = readMsg(io.MultiReader(bytes.NewReader(buf[:n]), c), helloLimit)
	trunc = flags&unix.MSG_CTRUNC != 0
	if trunc && err == nil && (m.op != opFDs || len(m.keys) != 1) {
		err = errors.New("control message truncated")
	}
	return fds, m, trunc, err
}

// Send passes fds to toRank under tag. The caller keeps its own descriptors
// (the receiver gets duplicates). The receiver may not be listening yet, so
// Send retries until ctx's deadline (DefaultCallTimeout without one). It
// returns nil once the receiver's process holds the descriptors (one that
// is closing at that moment closes them unclaimed).
func (x *FDExchange) Send(ctx context.Context, toRank int, tag string, fds []int) error {
	if toRank < 0 || toRank >= x.env.WorldSize {
		return fmt.Errorf("rendezvous: fd exchange: send to rank %d: no such rank in world size %d", toRank, x.env.WorldSize)
	}
	if len(fds) == 0 || len(fds) > MaxFDs {
		return fmt.Errorf("rendezvous: fd exchange: send %d descriptors to rank %d: need 1 to %d", len(fds), toRank, MaxFDs)
	}
	if tag == "" {
		return errors.New("rendezvous: fd exchange: empty tag: name what the descriptors are")
	}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	name := SocketName(x.env.JobID, toRank)
	what := fmt.Sprintf("rendezvous: fd exchange: send %q to rank %d (%s)", tag, toRank, name)
	c, err := x.dial(ctx, toRank, name)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer c.Close()
	stop := bindCtx(ctx, c)
	defer stop()
	if uid, err := peerUID(c); err != nil || uid != x.uid {
		return fmt.Errorf("%s: listener runs as uid %d, not ours (%d): refusing to hand it descriptors", what, uid, x.uid)
	}
	m := msg{op: opFDs, num: int64(x.env.Rank)<<32 | int64(len(fds)), keys: []string{tag}, vals: [][]byte{[]byte(x.env.Token)}}
	if _, _, err := c.WriteMsgUnix(m.encode(nil), unix.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	resp, err := readMsg(c, helloLimit)
	if err != nil {
		return fmt.Errorf("%s: no reply: %w", what, err)
	}
	text := ""
	if len(resp.vals) > 0 {
		text = string(resp.vals[0])
	}
	switch resp.op {
	case respOK:
		return nil
	case respRefused:
		return fmt.Errorf("%s: rank %d refused: %s: %w", what, toRank, text, ErrTokenRefused)
	}
	return fmt.Errorf("%s: rank %d says: %s", what, toRank, text)
}

// Started tells the exchange that ranks have created their exchanges
// (the caller knows it otherwise: they posted to a group's store
// all-gather, which every rank does after Init's NewFDExchange). A Send to
// one of them that finds nobody listening then fails at once, saying the
// rank closed its exchange (it gave up or exited), instead of retrying
// until its deadline for a listener that will not come. A message from a
// rank, or a dial to it that connected, tells the exchange the same.
func (x *FDExchange) Started(ranks ...int) {
	x.mu.Lock()
	for _, r := range ranks {
		x.started[r] = true
	}
	x.mu.Unlock()
}

// unreachable is Send's error when the receiver does not listen: it wraps
// ErrUnreachable and the dial's error without printing ErrUnreachable's
// text (which names the store).
type unreachable struct {
	msg string
	err error
}

func (e *unreachable) Error() string   { return e.msg + ": " + e.err.Error() }
func (e *unreachable) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// dial connects to toRank's listener at name, retrying while it is not
// listening yet (until ctx ends), but not once it is known to have listened
// (Started): then nobody listening means it closed its exchange.
func (x *FDExchange) dial(ctx context.Context, toRank int, name string) (*net.UnixConn, error) {
	start := time.Now()
	backoff := 5 * time.Millisecond
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		c, err := d.DialContext(ctx, "unix", name)
		x.mu.Lock()
		if err == nil {
			x.started[toRank] = true
		}
		started := x.started[toRank]
		x.mu.Unlock()
		if err == nil {
			return c.(*net.UnixConn), nil
		}
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			return nil, fmt.Errorf("this process (rank %d) is out of file descriptors (RLIMIT_NOFILE %d): %s: %w",
				x.env.Rank, fdLimit(), fdAdvice, err)
		}
		if started && errors.Is(err, unix.ECONNREFUSED) {
			return nil, &unreachable{fmt.Sprintf("rank %d closed its fd exchange (it had created it; nobody listens now): it gave up (a call of its own timed out or failed: see its error) or exited, and takes no more descriptors; if it timed out waiting for this rank, this rank came too late: start every rank within the timeout of the others, or raise the timeout (Options.Timeout)",
				toRank), err}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &unreachable{fmt.Sprintf("rank %d is not listening (%d attempts in %v): it has not created its fd exchange yet (symmem.Init, NewFDExchange: is it running, and started within the timeout?), or it closed it already (it gave up: a call of its own timed out or failed, see its error; or it exited)",
				toRank, attempt, time.Since(start).Round(time.Millisecond)), err}
		case <-t.C:
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// Discard gives up the descriptors the given ranks send under tag: those
// waiting are closed, and those that arrive later are closed on arrival (an
// exchange that failed midway: nothing will Recv them, and each holds a
// peer's memory until this FDExchange closes).
func (x *FDExchange) Discard(tag string, fromRanks []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, r := range fromRanks {
		k := mailKey{r, tag}
		x.dropped[k] = true
		for _, fds := range x.box[k] {
			closeFDs(fds)
		}
		delete(x.box, k)
		delete(x.failed, k)
	}
}

// Recv returns the descriptors fromRank sent under tag, waiting until ctx's
// deadline (DefaultCallTimeout without one). The caller owns (and must close)
// them. Sends with the same (rank, tag) may be received in any order
// (each is filed by its own connection): use a tag per message.
func (x *FDExchange) Recv(ctx context.Context, fromRank int, tag string) ([]int, error) {
	if fromRank < 0 || fromRank >= x.env.WorldSize {
		return nil, fmt.Errorf("rendezvous: fd exchange: receive from rank %d: no such rank in world size %d", fromRank, x.env.WorldSize)
	}
	ctx, cancel := withDefault(ctx)
	defer cancel()
	k := mailKey{fromRank, tag}
	start := time.Now()
	for {
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			return nil, fmt.Errorf("rendezvous: fd exchange: receive %q from rank %d: %w", tag, fromRank, ErrClosed)
		}
		if err := x.failed[k]; err != nil {
			delete(x.failed, k)
			x.mu.Unlock()
			return nil, fmt.Errorf("rendezvous: fd exchange: receive %q from rank %d: %w", tag, fromRank, err)
		}
		if q := x.box[k]; len(q) > 0 {
			fds := q[0]
			if len(q) == 1 {
				delete(x.box, k)
			} else {
				x.box[k] = q[1:]
			}
			x.mu.Unlock()
			return fds, nil
		}
		ch := x.changed
		x.mu.Unlock()
		select {
		case <-ch:
		case <-x.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: fd exchange: rank %d never sent %q to rank %d within %v: %w",
				ErrTimeout, fromRank, tag, x.env.Rank, time.Since(start).Round(time.Millisecond), ctx.Err())
		}
	}
}
