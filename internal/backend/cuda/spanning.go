package cuda

import (
	"sync/atomic"

	"github.com/symmem/symmem/internal/backend/internal/members"
)

// A group whose ranks sit on several hosts: the group's stop when a member
// on another host is gone or the ranks' calls differ (docs/multihost.md;
// this host's members' agreement: agreements.host, agreement.go).

// hostWatch is how a group that spans hosts learns that it must stop:
// abortGroup's error, the presence watch and the call log. The zero value
// watches nothing (a group on one host).
type hostWatch struct {
	// gone is abortGroup's error (a member gone, or a difference on this
	// host or between hosts); unwatch ends the presence watch (nil without
	// one); calls compares the calls across hosts after they were issued
	// (nil unless the group spans hosts).
	gone    atomic.Pointer[error]
	unwatch func()
	calls   *members.CallLog
}

// stop records e as the abort's error; false if one was recorded already.
func (w *hostWatch) stop(e error) bool { return w.gone.CompareAndSwap(nil, &e) }

// err is abortGroup's error, nil until the group was aborted.
func (w *hostWatch) err() error {
	if e := w.gone.Load(); e != nil {
		return *e
	}
	return nil
}

// close ends the presence watch and the call log (Group.Close).
func (w *hostWatch) close() {
	if w.unwatch != nil {
		w.unwatch()
	}
	if w.calls != nil {
		w.calls.Close()
	}
}
