// Package errs defines symmem's sentinel errors once. Internal packages wrap
// these values directly; the public packages users test against alias them
// once (symmem.ErrX, and pool.ErrX / rendezvous.ErrClosed for the users of
// those packages), so errors.Is matches the user API's documented sentinels
// whichever layer failed. The wrapping error says where and why; the
// sentinel says only what kind.
package errs

import "errors"

var (
	// NotSupported: the backend, algorithm, option or library is not
	// available in this build or on this machine.
	NotSupported = errors.New("not supported")
	// Invalid: a bad argument; nothing was changed.
	Invalid = errors.New("invalid argument")
	// Mismatch: ranks called a collective step with different arguments.
	Mismatch = errors.New("ranks disagree")
	// Closed: the object (world, pool, store client, communicator) was closed.
	Closed = errors.New("closed")
	// GroupClosed: the group was closed.
	GroupClosed = errors.New("group is closed")
	// Broken: an earlier collective on the group failed midway (a peer died
	// or timed out), so the ranks' signal state no longer agrees and the
	// group cannot be used again.
	Broken = errors.New("group is broken by an earlier failure")
	// PeerExited: a peer rank's process exited while this rank waited for
	// it; the wrapping error names the rank.
	PeerExited = errors.New("peer rank exited")
	// PeerClosed: a peer rank closed the world (or its group) while this
	// rank waited for it in a collective; the wrapping error names the rank.
	PeerClosed = errors.New("peer rank closed")
	// Refused: a forced algorithm cannot run this particular call (size,
	// alignment, type or buffers); nothing was enqueued and every rank
	// refuses alike.
	Refused = errors.New("the requested algorithm cannot run this call")
	// Timeout: a wait ran past its deadline (Options.Timeout, or the
	// caller's context); the error also wraps the deadline error it met
	// (context.DeadlineExceeded, ...).
	Timeout = errors.New("timed out")
)
