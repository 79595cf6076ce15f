// Package members is the group plumbing every backend shares: the store
// namespace of a group (with a generation that never repeats within a
// process), the store all-gather through which members agree, the fd swap
// between local members, the host identity, the table of registered
// segments, an in-band agreement over shared memory for members on one
// host (agree.go), and the call gate over the same pages, which numbers and
// approves a group's collectives (gate.go). Backends keep what differs
// (what a segment maps to, signal pads, paths, how a GPU waits).
package members

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/symmem/symmem/rendezvous"
)

var (
	genMu sync.Mutex
	gens  = map[string]int{}
)

// Generation numbers the groups of one name that this process creates on
// one backend kind in one job, so that the store keys (and NCCL unique ids)
// of a group created again — also by a second Backend in the same process —
// never meet those of an earlier one. It is process-wide on purpose: a
// per-Backend counter restarted at 0 and read a stale NCCL id under `symmem
// launch` (results/gpu-2026-11-21.md, run 4). Ranks that create the
// same groups in the same order agree on it.
func Generation(kind, job, name string) int {
	genMu.Lock()
	defer genMu.Unlock()
	k := kind + "\x00" + job + "\x00" + name
	g := gens[k]
	gens[k]++
	return g
}

// Prefix is the store namespace of generation gen of group name.
func Prefix(kind, job, name string, gen int) string {
	return fmt.Sprintf("symmem/%s/%s/%s#%d", job, kind, name, gen)
}

// HostID identifies this machine boot: ranks with equal IDs share memory.
func HostID() string {
	h, _ := os.Hostname()
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + strings.TrimSpace(string(id))
}

// Gather is a group's store all-gather: members call AllGather in the same
// order, each call under a fresh key of the group's namespace (the last
// rank to read deletes them), bounded by the group timeout.
type Gather struct {
	what    string // "shm: group \"tp0\"" for errors
	store   *rendezvous.Client
	prefix  string
	ranks   []int
	me      int
	timeout time.Duration

	mu  sync.Mutex
	seq int
}

// NewGather returns the all-gather of the group whose members are ranks (me
// is this rank's index) under prefix.
func NewGather(what string, store *rendezvous.Client, prefix string, ranks []int, me int, timeout time.Duration) *Gather {
	return &Gather{what: what, store: store, prefix: prefix, ranks: ranks, me: me, timeout: timeout}
}

// AllGather returns every member's bytes by group rank.
func (a *Gather) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	seq := a.seq
	a.seq++
	vals, err := a.store.AllGather(ctx, fmt.Sprintf("%s/ag/%d", a.prefix, seq), a.ranks, a.me, mine)
	if err != nil {
		return nil, fmt.Errorf("%s all-gather #%d (timeout %v): %w", a.what, seq, a.timeout, err)
	}
	return vals, nil
}

// Swap sends fd to every other member under tag and calls recv with each
// member's fd (indexed by group rank), bounded by the group timeout.
func Swap(ctx context.Context, fdx *rendezvous.FDExchange, prefix, tag string, ranks []int, me int, timeout time.Duration, fd int, recv func(r, fd int) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fdx.Swap(ctx, prefix+"/"+tag, ranks, me, fd, recv)
}
