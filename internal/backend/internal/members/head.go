package members

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/rendezvous"
)

// Head is a group's membership as both backends hold it (their Group
// embeds it): who the members are, this rank's place among them, and the
// namespace and bound of the group's exchanges.
type Head struct {
	GroupName string                 // the group's name (Name)
	Ranks     []int                  // members' global ranks, by group rank
	Me        int                    // this rank's group rank (Rank)
	Store     *rendezvous.Client     // the job's store
	FDs       *rendezvous.FDExchange // fd passing between local ranks; nil when unused
	Timeout   time.Duration          // bound on every wait of the group (> 0)
	Prefix    string                 // store key and fd tag namespace (Prefix)
	Gather    *Gather                // the group's store all-gather
}

// NewHead validates cfg (backend.GroupConfig.Index) and returns the head of
// generation gen of group cfg.Name of a backend (kind: "shm", "cuda") in
// job.
func NewHead(kind, job string, cfg backend.GroupConfig, gen int) (Head, error) {
	me, err := cfg.Index()
	if err != nil {
		return Head{}, fmt.Errorf("%s: %w", kind, err)
	}
	h := Head{GroupName: cfg.Name, Ranks: slices.Clone(cfg.Ranks), Me: me, Store: cfg.Store, FDs: cfg.FDs,
		Timeout: cfg.Timeout, Prefix: Prefix(kind, job, cfg.Name, gen)}
	h.Gather = NewGather(fmt.Sprintf("%s: group %q", kind, cfg.Name), h.Store, h.Prefix, h.Ranks, me, h.Timeout)
	return h, nil
}

// Rank is this process's rank in the group.
func (h *Head) Rank() int { return h.Me }

// Size is the number of ranks in the group.
func (h *Head) Size() int { return len(h.Ranks) }

// Name is the group's name.
func (h *Head) Name() string { return h.GroupName }

// AllGather returns every member's bytes by group rank, through the store
// (Gather): members call it in the same order.
func (h *Head) AllGather(ctx context.Context, mine []byte) ([][]byte, error) {
	return h.Gather.AllGather(ctx, mine)
}

// Swap sends fd to every other member under tag and calls recv with each
// member's fd, by group rank (the package's Swap, in the group's namespace).
func (h *Head) Swap(ctx context.Context, tag string, fd int, recv func(r, fd int) error) error {
	return Swap(ctx, h.FDs, h.Prefix, tag, h.Ranks, h.Me, h.Timeout, fd, recv)
}
