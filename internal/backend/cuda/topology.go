package cuda

import (
	"encoding/json"
	"fmt"
)

// identity is what a rank tells its group at setup: where it runs and
// what it loaded.
type identity struct {
	Rank  int    `json:"rank"`  // in the world
	Host  string `json:"host"`  // env.HostID
	PCI   string `json:"pci"`   // its GPU's PCI bus ID
	Kern  bool   `json:"kern"`  // it loaded symmem's kernels, within their rank limit
	Guard bool   `json:"guard"` // it loaded the call gate's guard
}

// decodeIdentities reads the identities the group's members sent.
func decodeIdentities(all [][]byte, ranks []int) ([]identity, error) {
	ids := make([]identity, len(all))
	for q, v := range all {
		if err := json.Unmarshal(v, &ids[q]); err != nil {
			return nil, fmt.Errorf("rank %d sent a malformed identity %q: %w", ranks[q], v, err)
		}
	}
	return ids, nil
}

// topology is what a group's identities decide, before any driver, store
// or NCCL call: the same on every rank but for what is relative to this
// rank (local, peers, remote).
type topology struct {
	hostOf []int // each member's host, numbered by first appearance
	spans  bool  // some member runs on another host
	local  []int // the members on this rank's host, in group order (this rank among them)
	// peers are the other members this rank's copy engines would reach,
	// in group order, up to remote, the first member on another host (-1:
	// none), which rules copy engines out. setup asks the driver about
	// each peer on another GPU, in order, and stops at the first it cannot
	// reach.
	peers  []peer
	remote int
	// kern: every member loaded the kernels; kernWhy names the first that
	// did not.
	kern    bool
	kernWhy string
	guard   bool // every member loaded the guard: every call goes through the gate
}

// caps are the paths' preconditions, decided at setup from the topology
// (Group.reachPeers, Group.loadKernel) and fixed after.
type caps struct {
	// Copy-engine availability: every member on this host, P2P reachable.
	ce    bool
	ceWhy string
	// sharing names the ranks that use this rank's GPU too ("" if none);
	// NCCL is unavailable then.
	sharing string
	kernWhy string // why the group has no kernels
}

// peer is another member on this rank's host.
type peer struct {
	member  int  // its index in the group
	sameGPU bool // it runs on this rank's GPU (else P2P decides whether copy engines reach it)
}

// newTopology is what all, the members' identities in group order, decide
// for member me.
func newTopology(all []identity, me int) topology {
	t := topology{hostOf: make([]int, len(all)), remote: -1, kern: true, guard: true}
	mine := all[me]
	hosts := map[string]int{}
	for q, id := range all {
		if _, ok := hosts[id.Host]; !ok {
			hosts[id.Host] = len(hosts)
		}
		t.hostOf[q] = hosts[id.Host]
		if id.Host == mine.Host {
			t.local = append(t.local, q)
		} else {
			t.spans = true
		}
		if t.kern && !id.Kern {
			t.kern, t.kernWhy = false, fmt.Sprintf("rank %d cannot load it", id.Rank)
		}
		t.guard = t.guard && id.Guard
		switch {
		case q == me || t.remote >= 0:
		case id.Host != mine.Host:
			t.remote = q
		default:
			t.peers = append(t.peers, peer{member: q, sameGPU: id.PCI == mine.PCI})
		}
	}
	return t
}
