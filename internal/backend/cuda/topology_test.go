package cuda

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/symmem/symmem/rendezvous"
)

// ids are identities of ranks 10, 11, ... on hosts and GPUs "host/pci",
// with kernels and the guard.
func ids(where ...string) []identity {
	out := make([]identity, len(where))
	for q, w := range where {
		host, pci, _ := strings.Cut(w, "/")
		out[q] = identity{Rank: 10 + q, Host: host, PCI: pci, Kern: true, Guard: true}
	}
	return out
}

func TestTopology(t *testing.T) {
	without := func(all []identity, q int, kern, guard bool) []identity {
		all[q].Kern, all[q].Guard = kern, guard
		return all
	}
	for _, tc := range []struct {
		name string
		all  []identity
		me   int
		want topology
	}{
		{"2 GPUs", ids("a/0", "a/1"), 0,
			topology{hostOf: []int{0, 0}, local: []int{0, 1}, peers: []localPeer{{1, false}}, remote: -1, kern: true, guard: true}},
		{"4 GPUs, the third rank", ids("a/0", "a/1", "a/2", "a/3"), 2,
			topology{hostOf: []int{0, 0, 0, 0}, local: []int{0, 1, 2, 3}, peers: []localPeer{{0, false}, {1, false}, {3, false}}, remote: -1, kern: true, guard: true}},
		{"8 GPUs", ids("a/0", "a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7"), 7,
			topology{hostOf: make([]int, 8), local: []int{0, 1, 2, 3, 4, 5, 6, 7},
				peers: []localPeer{{0, false}, {1, false}, {2, false}, {3, false}, {4, false}, {5, false}, {6, false}}, remote: -1, kern: true, guard: true}},
		{"two ranks a GPU", ids("a/0", "a/0", "a/1", "a/1"), 1,
			topology{hostOf: []int{0, 0, 0, 0}, local: []int{0, 1, 2, 3}, peers: []localPeer{{0, true}, {2, false}, {3, false}}, remote: -1, kern: true, guard: true}},
		{"one GPU", ids("a/0", "a/0"), 0,
			topology{hostOf: []int{0, 0}, local: []int{0, 1}, peers: []localPeer{{1, true}}, remote: -1, kern: true, guard: true}},
		{"two hosts", ids("a/0", "a/1", "b/0", "b/1"), 3,
			topology{hostOf: []int{0, 0, 1, 1}, spans: true, local: []int{2, 3}, remote: 0, kern: true, guard: true}},
		{"two hosts, the first host", ids("a/0", "a/1", "b/0", "b/1"), 0,
			topology{hostOf: []int{0, 0, 1, 1}, spans: true, local: []int{0, 1}, peers: []localPeer{{1, false}}, remote: 2, kern: true, guard: true}},
		{"hosts interleaved", ids("a/0", "b/0", "a/1", "b/1", "c/0"), 2,
			topology{hostOf: []int{0, 1, 0, 1, 2}, spans: true, local: []int{0, 2}, peers: []localPeer{{0, false}}, remote: 1, kern: true, guard: true}},
		{"one rank", ids("a/0"), 0,
			topology{hostOf: []int{0}, local: []int{0}, remote: -1, kern: true, guard: true}},
		{"a rank without kernels", without(ids("a/0", "a/1", "a/2"), 1, false, true), 0,
			topology{hostOf: []int{0, 0, 0}, local: []int{0, 1, 2}, peers: []localPeer{{1, false}, {2, false}}, remote: -1, kernWhy: "rank 11 cannot load it", guard: true}},
		{"a rank without the guard", without(ids("a/0", "a/1"), 0, true, false), 1,
			topology{hostOf: []int{0, 0}, local: []int{0, 1}, peers: []localPeer{{0, false}}, remote: -1, kern: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newTopology(tc.all, tc.me); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestIdentityRoundTrip: what a rank sends is what its peers read; a
// malformed one names its sender.
func TestIdentityRoundTrip(t *testing.T) {
	want := ids("host-1/0000:18:00.0", "host-2/0000:2a:00.0")
	var raw [][]byte
	for _, id := range want {
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b)
	}
	if got, err := decodeIdentities(raw, []int{10, 11}); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	raw[1] = []byte("host|pci|1|true|true")
	if _, err := decodeIdentities(raw, []int{10, 11}); err == nil || !strings.Contains(err.Error(), "rank 11 sent a malformed identity") {
		t.Errorf("a malformed identity: %v", err)
	}
}

// TestReachPeers: copy engines serve a group whose other members this
// rank's GPU reaches by P2P on one host, up to the first that is not; ranks
// on this rank's GPU are refused unless the backend lets them share it.
func TestReachPeers(t *testing.T) {
	p2pErr := errors.New("driver failure")
	// probe: GPU "x" is hidden, "n" has no P2P, "e" fails, others reach.
	probe := func(pci string) (int, bool, error, error) {
		switch pci {
		case "x":
			return 0, false, errors.New("no such device"), nil
		case "n":
			return 5, false, nil, nil
		case "e":
			return 0, false, nil, p2pErr
		}
		return 1, true, nil, nil
	}
	for _, tc := range []struct {
		name    string
		all     []identity
		me      int
		share   bool
		ce      bool
		why     string
		sharing string
		err     error
	}{
		{"4 GPUs", ids("a/0", "a/1", "a/2", "a/3"), 0, false, true, "every rank is on this host and P2P-reachable", "", nil},
		{"no P2P", ids("a/0", "a/1", "a/n", "a/3"), 0, false, false, "device 0 cannot access rank 12's device 5 (no P2P)", "", nil},
		{"hidden GPU", ids("a/0", "a/x"), 0, false, false, "rank 11's GPU x is not visible here (no such device)", "", nil},
		{"driver failure", ids("a/0", "a/e"), 0, false, true, "every rank is on this host and P2P-reachable", "", p2pErr},
		{"shared GPU refused", ids("a/0", "a/0"), 1, false, true, "every rank is on this host and P2P-reachable", "", ErrSharedDevice},
		{"shared GPU", ids("a/0", "a/1", "a/0", "a/1"), 0, true, true, "every rank is on this host and P2P-reachable", " 12", nil},
		{"two hosts", ids("a/0", "a/1", "b/0", "b/1"), 0, false, false, "rank 12 runs on another host", "", nil},
		// The first member copy engines cannot reach decides, in group order.
		{"no P2P before another host", ids("a/0", "a/n", "b/0"), 0, false, false, "device 0 cannot access rank 11's device 5 (no P2P)", "", nil},
		{"another host before no P2P", ids("a/0", "b/0", "a/n"), 0, false, false, "rank 11 runs on another host", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := fakeGroup(len(tc.all), tc.me)
			g.FDs = &rendezvous.FDExchange{}
			g.b.share = tc.share
			err := g.caps.reach(tc.all, newTopology(tc.all, tc.me), g.FDs != nil, g.b.share, g.b.info.Ordinal, probe)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if g.caps.ce != tc.ce || g.caps.ceWhy != tc.why || g.caps.sharing != tc.sharing {
				t.Errorf("ce %v (%s), sharing %q; want %v (%s), %q", g.caps.ce, g.caps.ceWhy, g.caps.sharing, tc.ce, tc.why, tc.sharing)
			}
		})
	}
	g := fakeGroup(2, 0)
	if err := g.caps.reach(ids("a/0", "a/1"), newTopology(ids("a/0", "a/1"), 0), g.FDs != nil, g.b.share, g.b.info.Ordinal, probe); err != nil || g.caps.ce || g.caps.ceWhy != "no fd exchange to share segments" {
		t.Errorf("without an fd exchange: ce %v (%s), %v", g.caps.ce, g.caps.ceWhy, err)
	}
}
