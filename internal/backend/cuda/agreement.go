package cuda

import (
	"context"
	"fmt"
	"slices"

	"github.com/symmem/symmem/internal/backend/internal/members"
)

// agreements are the group's in-band agreements among members on this
// host (members.HostAgreement): the whole group's, or this host's part of
// a group that spans hosts.
type agreements struct {
	// group compares records in-band when every rank is on this host
	// (Agreer); nil otherwise (the store).
	group *members.HostAgreement
	// host, in a group that spans hosts, is the agreement of the members
	// on this rank's host (their group indices: hostMembers), whose gate
	// compares their calls (hostGate); nil where group covers the group or
	// this rank is alone on its host.
	host        *members.HostAgreement
	hostMembers []int
}

// joinHost sets up host (group setup, when the group spans hosts): the
// members on this rank's host (local, group indices), when there are two
// or more and the job passes file descriptors. Collective over those
// members.
func (a *agreements) joinHost(ctx context.Context, h *members.Head, local []int) error {
	if len(local) < 2 || h.FDs == nil {
		return nil
	}
	ranks := make([]int, len(local))
	for i, q := range local {
		ranks[i] = h.Ranks[q]
	}
	ha, err := members.NewHostAgreement(ctx, fmt.Sprintf("cuda: group %q, this host's members", h.GroupName), h.FDs, h.Prefix+"/host", ranks, slices.Index(local, h.Me), h.Timeout)
	if err != nil {
		return err
	}
	a.host, a.hostMembers = ha, local
	return nil
}

// setState sets bits in this rank's state word of each agreement: the
// peers waiting for this rank learn it at once.
func (a *agreements) setState(bits uint64) {
	for _, x := range []*members.HostAgreement{a.group, a.host} {
		if x != nil {
			x.SetState(bits)
		}
	}
}

// close closes each agreement (Group.Close).
func (a *agreements) close() {
	for _, x := range []*members.HostAgreement{a.group, a.host} {
		if x != nil {
			x.Close()
		}
	}
}
