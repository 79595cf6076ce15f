package cuda

import (
	"encoding/json"
	"fmt"

	"github.com/symmem/symmem/internal/errs"
	"github.com/symmem/symmem/rendezvous"
)

// ErrSharedDevice is wrapped when ranks of a group use one GPU and sharing
// was not allowed (Options.ShareDevice). It matches errs.NotSupported too.
var ErrSharedDevice = fmt.Errorf("cuda: ranks share a GPU: %w", errs.NotSupported)

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
	peers  []localPeer
	remote int
	// kern: every member loaded the kernels; kernWhy names the first that
	// did not.
	kern    bool
	kernWhy string
	guard   bool // every member loaded the guard: every call goes through the gate
}

// caps are the paths' preconditions, decided at setup from the topology
// (reach, kernels.forGroup) and fixed after.
type caps struct {
	// Copy-engine availability: every member on this host, P2P reachable.
	ce    bool
	ceWhy string
	// sharing names the ranks that use this rank's GPU too ("" if none);
	// NCCL is unavailable then.
	sharing string
	kernWhy string // why the group has no kernels
}

// reach decides whether copy engines serve the group (ce, ceWhy) and
// which members share this rank's GPU (sharing): t's peers in group order,
// probe's answer for each on another GPU, up to the first it cannot reach;
// then t.remote. all are the members' identities, fds whether the job
// passes file descriptors, share Options.ShareDevice, dev this rank's
// device.
func (c *caps) reach(all []identity, t topology, fds, share bool, dev int, probe func(pci string) (dev int, access bool, hidden, err error)) error {
	c.ce, c.ceWhy = true, "every rank is on this host and P2P-reachable"
	if !fds && len(all) > 1 {
		c.ce, c.ceWhy = false, "no fd exchange to share segments"
		return nil
	}
	for _, p := range t.peers {
		id := all[p.member]
		if p.sameGPU { // peer mappings and copy engines work
			if !share {
				return fmt.Errorf("rank %d uses the same GPU (%s) as this rank: give each rank its own device, or let ranks share it "+
					"(symmem.Options.GPU.ShareDevice, %s=1, or `symmem launch --share-device`; symmem's own paths only, NCCL needs a GPU per rank): %w",
					id.Rank, id.PCI, rendezvous.VarShareDevice, ErrSharedDevice)
			}
			c.sharing += fmt.Sprintf(" %d", id.Rank)
			continue
		}
		peerDev, access, hidden, err := probe(id.PCI)
		switch {
		case hidden != nil:
			c.ce, c.ceWhy = false, fmt.Sprintf("rank %d's GPU %s is not visible here (%v)", id.Rank, id.PCI, hidden)
			return nil
		case err != nil:
			return err
		case !access:
			c.ce, c.ceWhy = false, fmt.Sprintf("device %d cannot access rank %d's device %d (no P2P)", dev, id.Rank, peerDev)
			return nil
		}
	}
	if t.remote >= 0 {
		c.ce, c.ceWhy = false, fmt.Sprintf("rank %d runs on another host", all[t.remote].Rank)
	}
	return nil
}

// localPeer is another member on this rank's host.
type localPeer struct {
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
			t.peers = append(t.peers, localPeer{member: q, sameGPU: id.PCI == mine.PCI})
		}
	}
	return t
}
