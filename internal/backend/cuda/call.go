package cuda

import "github.com/symmem/symmem/internal/backend"

// call is one collective on its way through Run: built there once and
// passed down, so no step depends on state another step left in the group.
type call struct {
	// req is the request as it runs: Algo is the path chosen (in the
	// fingerprint, fault.go, and the gate's entry, gate.go), Stream the
	// stream it runs on (the backend's when the caller gave none).
	req backend.Request
	// win: both buffers lie in NCCL windows, decided once for the choice
	// and for NCCL.
	win bool
	// gate is its place at the call gate, set by publish.
	gate ticket
}

// ticket is a call's place at the call gate (gate.go): its number, and the
// number its stream waits for before it runs (0: none, it was approved at
// publish, or the group has no gate).
type ticket struct{ n, wait uint64 }
