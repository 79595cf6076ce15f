package backend

import "sync"

var (
	genMu sync.Mutex
	gens  = map[string]int{}
)

// Generation numbers the groups of one name that this process creates in
// one job (GroupConfig.Gen), so that the store keys (and NCCL unique ids)
// of a group created again never meet those of an earlier one. The user
// API counts every NewGroup on every rank, members or not: a name closed
// and used again with other members then gets the same generation on
// every rank (counted by members only, a rank new to the name started
// over at 0 and waited for keys its peers wrote under 1). It is
// process-wide on purpose: a per-Backend counter restarts at 0 and reads a
// stale NCCL id under `symmem launch`.
func Generation(job, name string) int {
	genMu.Lock()
	defer genMu.Unlock()
	k := job + "\x00" + name
	g := gens[k]
	gens[k]++
	return g
}
