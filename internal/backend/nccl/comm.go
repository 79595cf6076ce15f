package nccl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/internal/native/libnccl"
	"github.com/symmem/symmem/rendezvous"
)

// load is replaced in tests to simulate a machine without NCCL.
var load = libnccl.Load

// Comm is one NCCL communicator of a group. It is safe for concurrent use:
// calls on one communicator are serialised (NCCL requires that).
type Comm struct {
	lib     *libnccl.Lib
	group   string
	rank    int
	size    int
	cuctx   uintptr
	timeout time.Duration
	cfg     Config

	mu      sync.Mutex
	h       *libnccl.CommHandle
	wins    []window // sorted by ptr, non-overlapping
	closed  bool
	broken  error // set once the communicator was aborted after a failure
	revoked bool  // Stop revoked it: Close destroys it without finalizing
	// abandoned: Abandon revoked it; Close leaves it (and the strings
	// its config points to) allocated.
	abandoned bool
}

// New creates the group's communicator. It is collective over the group:
// every rank calls it with the same Group, Generation and Size. It fails
// (never hangs) when a rank does not arrive within the timeout.
func New(ctx context.Context, o Options) (*Comm, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	cfg, err := o.Config.native(o.GroupName)
	if err != nil {
		return nil, err
	}
	lib := o.Lib
	if lib == nil {
		if lib, err = load(); err != nil {
			return nil, fmt.Errorf("nccl: group %q: %w", o.GroupName, err)
		}
	}
	timeout := o.Timeout
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	id, err := exchangeID(wctx, o.Store, keyPrefix(o.GroupName, o.Generation), o.Rank, o.Size, lib.Version, lib.GetUniqueID)
	if err != nil {
		return nil, fmt.Errorf("nccl: group %q rank %d: %w", o.GroupName, o.Rank, err)
	}
	c := &Comm{lib: lib, group: o.GroupName, rank: o.Rank, size: o.Size, cuctx: uintptr(o.Context),
		timeout: timeout, cfg: o.Config}
	var h *libnccl.CommHandle
	if o.Config.NonBlocking {
		h, err = lib.CommInitRank(c.cuctx, o.Size, o.Rank, id, cfg)
		if err == nil {
			c.h = h
			err = lib.Wait(wctx, h.Comm, "ncclCommInitRankConfig")
		}
	} else {
		h, err = bounded(wctx, "ncclCommInitRankConfig", func() (*libnccl.CommHandle, error) {
			return lib.CommInitRank(c.cuctx, o.Size, o.Rank, id, cfg)
		})
		if errors.Is(err, libnccl.ErrTimeout) {
			return nil, fmt.Errorf("nccl: group %q rank %d of %d: creating the communicator: %w", o.GroupName, o.Rank, o.Size, err)
		}
	}
	if err != nil {
		if h != nil && h.Comm != 0 {
			if aerr := lib.Abort(c.cuctx, h.Comm); aerr != nil {
				err = errors.Join(err, aerr)
			}
			h.Free()
		}
		return nil, fmt.Errorf("nccl: group %q rank %d of %d: creating the communicator: %w", o.GroupName, o.Rank, o.Size, err)
	}
	c.h = h
	return c, nil
}

// exchangeID publishes this rank's view (group size, NCCL version), has
// rank 0 publish a fresh unique id, and waits for the id and every rank's
// view. Ranks that disagree get errs.Mismatch naming who differs.
func exchangeID(ctx context.Context, st Store, prefix string, rank, size, version int,
	newID func() (libnccl.UniqueID, error)) (libnccl.UniqueID, error) {
	var id libnccl.UniqueID
	mine := []byte(fmt.Sprintf("size=%d nccl=%s", size, libnccl.VersionString(version)))
	if err := st.Set(ctx, prefix+"hello/"+strconv.Itoa(rank), mine); err != nil {
		return id, fmt.Errorf("publishing this rank's hello: %w", err)
	}
	if rank == 0 {
		fresh, err := newID()
		if err != nil {
			return id, err
		}
		if err := st.Set(ctx, prefix+"uid", fresh[:]); err != nil {
			return id, fmt.Errorf("publishing the NCCL unique id: %w", err)
		}
	}
	keys := make([]string, 0, size+1)
	keys = append(keys, prefix+"uid")
	for r := 0; r < size; r++ {
		keys = append(keys, prefix+"hello/"+strconv.Itoa(r))
	}
	vals, err := st.Wait(ctx, keys...)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, rendezvous.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return id, fmt.Errorf("%w waiting for the group's ranks to publish their hello and the unique id: %w", libnccl.ErrTimeout, err)
		}
		return id, fmt.Errorf("waiting for the group's ranks: %w", err)
	}
	// The last rank to have read every key removes them: a job that makes
	// and closes groups for long would otherwise grow the store by size+1
	// keys per communicator. A failed cleanup only leaves them there.
	if n, err := st.Add(ctx, prefix+"done", 1); err == nil && n == int64(size) {
		for _, k := range append(keys, prefix+"done") {
			st.Delete(ctx, k)
		}
	}
	if len(vals) != len(keys) {
		return id, fmt.Errorf("store returned %d values for %d keys", len(vals), len(keys))
	}
	if len(vals[0]) != len(id) {
		return id, fmt.Errorf("%w: unique id under %q has %d bytes, want %d", errs.Mismatch, keys[0], len(vals[0]), len(id))
	}
	for r, v := range vals[1:] {
		if !bytes.Equal(v, mine) {
			return id, fmt.Errorf("%w: rank %d says %q, this rank says %q (same group size and NCCL library on every rank)",
				errs.Mismatch, r, v, mine)
		}
	}
	copy(id[:], vals[0])
	return id, nil
}

// Rank is this rank's index in the group.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the group.
func (c *Comm) Size() int { return c.size }

// Group is the group's name.
func (c *Comm) Group() string { return c.group }

// Lib is the NCCL library in use (path, version, window support).
func (c *Comm) Lib() *libnccl.Lib { return c.lib }

// Config is the configuration the communicator was created with.
func (c *Comm) Config() Config { return c.cfg }

// usable reports why the communicator cannot take a call; c.mu held.
func (c *Comm) usable() error {
	if c.closed {
		return fmt.Errorf("nccl: group %q: %w", c.group, errs.Closed)
	}
	if c.broken != nil {
		return c.broken
	}
	if c.revoked {
		return fmt.Errorf("nccl: group %q rank %d: stopped: %w", c.group, c.rank, errs.Broken)
	}
	return nil
}

// fail aborts the communicator after err; later calls return errs.Broken
// wrapping err. c.mu held.
func (c *Comm) fail(err error) error {
	if c.broken != nil {
		return c.broken
	}
	aerr := c.lib.Abort(c.cuctx, c.h.Comm)
	c.wins = nil // NCCL freed the windows with the communicator
	c.broken = fmt.Errorf("nccl: group %q rank %d: %w: %w", c.group, c.rank, errs.Broken, errors.Join(err, aerr))
	return c.broken
}

// settle finishes a call that NCCL may have accepted as in progress; c.mu held.
func (c *Comm) settle(ctx context.Context, call string, err error) error {
	if err == nil {
		return nil
	}
	if !libnccl.IsInProgress(err) {
		return fmt.Errorf("nccl: group %q rank %d: %w", c.group, c.rank, err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if werr := c.lib.Wait(wctx, c.h.Comm, call); werr != nil {
		return c.fail(werr)
	}
	return nil
}

// Close releases the communicator: windows are deregistered, outstanding
// work is flushed (ncclCommFinalize, bounded by the timeout) and the
// communicator destroyed; on any failure it is aborted. Collective over the
// group. Closing twice is a no-op.
func (c *Comm) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.abandoned {
		return nil
	}
	defer c.h.Free()
	if c.broken != nil {
		return nil // already aborted
	}
	if c.revoked { // quiesced, not finalizable: destroyed alone (its windows with it)
		c.wins = nil
		if err := c.lib.Destroy(c.cuctx, c.h.Comm); err != nil {
			return fmt.Errorf("nccl: group %q rank %d: close after stop: %w", c.group, c.rank, errors.Join(err, c.lib.Abort(c.cuctx, c.h.Comm)))
		}
		return nil
	}
	var errs []error
	for _, w := range c.wins {
		if err := c.lib.WindowDeregister(c.cuctx, c.h.Comm, w.win); err != nil {
			errs = append(errs, err)
		}
	}
	c.wins = nil
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.lib.Finalize(c.cuctx, c.h.Comm)
	if err == nil {
		err = c.lib.Wait(wctx, c.h.Comm, "ncclCommFinalize")
	}
	if err == nil {
		err = c.lib.Destroy(c.cuctx, c.h.Comm)
	} else {
		errs = append(errs, err)
		err = c.lib.Abort(c.cuctx, c.h.Comm)
	}
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("nccl: group %q rank %d: close: %w", c.group, c.rank, errors.Join(errs...))
	}
	return nil
}

// Stop ends the communicator's work at once without waiting for peers (a
// peer died, or the ranks' calls differ): NCCL kernels waiting for a peer
// end. Where NCCL has ncclCommRevoke (2.28+) it revokes (the communicator
// stays until Close destroys it, which then takes no peer), else, or when
// revoking fails, it aborts. Later calls fail with errs.Broken (or
// errs.Closed after an abort).
func (c *Comm) Stop() error { return c.stop(false) }

// Abandon is Stop for a communicator whose ranks' calls differed (a count
// that differs between hosts, found after NCCL ran it): NCCL's state after
// such a call is undefined, and on 2 "hosts" of 2 GPUs (NCCL 2.28.9, socket
// transport) aborting one crashed the process in 4 runs of 4 and destroying
// a revoked one in 1 of 4 (SIGSEGV inside NCCL). A revoked communicator is
// left allocated instead: Close and Abort free nothing of it. Where NCCL
// cannot revoke, it is aborted (Stop), as nothing else ends its kernels.
func (c *Comm) Abandon() error { return c.stop(true) }

// stop is Stop, and Abandon with abandon set: the revoke and the abandoned
// mark are one step under mu, so a Close waiting for mu never destroys a
// communicator being abandoned.
func (c *Comm) stop(abandon bool) error {
	if !c.lib.HasRevoke {
		return c.Abort()
	}
	c.mu.Lock()
	if c.closed || c.broken != nil || c.revoked {
		c.abandoned = c.abandoned || abandon && c.revoked && !c.closed
		c.mu.Unlock()
		return nil
	}
	err := c.lib.Revoke(c.cuctx, c.h.Comm)
	if err == nil {
		wctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		err = c.lib.Wait(wctx, c.h.Comm, "ncclCommRevoke")
		cancel()
	}
	if err == nil {
		c.revoked, c.abandoned = true, abandon
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return errors.Join(fmt.Errorf("nccl: group %q rank %d: %w", c.group, c.rank, err), c.Abort())
}

// Abort tears the communicator down at once without waiting for peers (use
// when a peer died). Later calls fail with errs.Closed.
func (c *Comm) Abort() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.abandoned {
		return nil // left allocated on purpose (Abandon)
	}
	defer c.h.Free()
	c.wins = nil
	if c.broken != nil {
		return nil
	}
	if err := c.lib.Abort(c.cuctx, c.h.Comm); err != nil {
		return fmt.Errorf("nccl: group %q rank %d: %w", c.group, c.rank, err)
	}
	return nil
}
