// Package wait is the foundation's one definition of how long symmem waits:
// DefaultTimeout, the bound every layer (the user API, the pool, the CPU,
// GPU and NCCL backends) applies to a wait for peers when its caller gives
// none. It sits below every backend; of symmem it imports only
// internal/native/hostmem (the futex).
//
// It also holds the one waiting primitive, Until: poll a condition in a
// short spin, then sleep (on a futex word that whoever meets the condition
// wakes, or in growing naps), every step bounded by ctx and a deadline, with
// a Check hook before each sleep that lets the caller end the wait in its
// own words (a peer that is gone, the timeout). Spin is its spin phase alone,
// for a caller that then blocks on a channel or a sync.Cond, and Poll the
// same for a condition that can fail and costs a cgo call per poll. The
// waits for peers and helpers use them: the CPU backend's signal pads and
// worker crew, the host agreement, call gate and all-gather watch of
// internal/backend/internal/members, the pool's fence wait, the GPU
// backend's approval spin, libnccl's in-progress poll and cudadrv's stream
// and event spin (the native packages other than hostmem may import this
// one: it imports only hostmem).
package wait

import "time"

// DefaultTimeout bounds a wait for peers (store, fd exchange, signals,
// registration) when no timeout is given: symmem.DefaultTimeout, and the
// pool's default Options.Timeout.
const DefaultTimeout = 60 * time.Second
