// Package wait is the foundation's one definition of how long symmem waits:
// DefaultTimeout, the bound every layer (the user API, the pool, the CPU,
// GPU and NCCL backends) applies to a wait for peers when its caller gives
// none. It sits below every backend and imports nothing of symmem.
//
// It is also where the one waiting primitive is to live (spin briefly, then
// block on a futex or sleep, every step bounded by the clock), so that every
// wait in symmem has the same shape and the same bound; today each backend
// still has its own loop.
package wait

import "time"

// DefaultTimeout bounds a wait for peers (store, fd exchange, signals,
// registration) when no timeout is given. symmem.DefaultTimeout and
// pool.DefaultTimeout are this value.
const DefaultTimeout = 60 * time.Second
