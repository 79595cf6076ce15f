package plan

import "github.com/symmem/symmem/internal/wait"

// Target is the value a Signal of phase stores, and a Wait of phase waits
// for, in a call whose epoch base is base (see "Signals and epochs" in the
// package doc). After the call the base advances by Plan.Phases.
func Target(base uint32, phase int) uint32 { return base + uint32(phase) + 1 }

// Reached reports whether a signal word holding word satisfies a wait for
// target: int32(word-target) >= 0, a "greater or equal" that survives the
// 32-bit wrap (the semantics of CUDA's CU_STREAM_WAIT_VALUE_GEQ). It is
// wait.Reached, which the backend's waits use.
func Reached(word, target uint32) bool { return wait.Reached(word, target) }
