package agree

// Calls is how a backend's groups agree on each collective's record
// (declared in backend.Capabilities; constant for a backend).
type Calls uint8

const (
	// CallsInBand: Run compares every call's record (Request.Record)
	// across the ranks before any data moves, and on a difference fails on
	// every rank with an error wrapping a *Disagreement, which the
	// user API names (Disagreement); the group stays usable. The CPU
	// backend, on its signal pads.
	CallsInBand Calls = iota + 1
	// CallsByDigest: symmem's kernels compare the call's digest in-band,
	// and for ranks on one host the gate compares every call's record and
	// path; the backend names a difference itself (Explain), from Run, a
	// later call or a synchronisation, never as a *Disagreement.
	// Outside one host, copy-engine and NCCL calls are compared only in
	// checked mode. The GPU backend.
	CallsByDigest
)

func (c Calls) String() string {
	switch c {
	case CallsInBand:
		return "in-band per call (no store)"
	case CallsByDigest:
		return "kernels' digest in-band; the call gate on one host"
	}
	return "none"
}
