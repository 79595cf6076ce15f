package libnccl

import "testing"

// TestConfigLayout checks the hand-declared ncclConfig_t and ncclUniqueId
// against NCCL 2.28.3's src/nccl.h.in (ncclConfig_v22800; the 2.28.9 header
// is identical): size 80 on LP64, fields in this order and at these offsets.
func TestConfigLayout(t *testing.T) {
	want := []struct {
		name string
		v    int
	}{
		{"sizeof(ncclConfig_t)", 80},
		{"magic", 8}, {"version", 12},
		{"blocking", 16}, {"cgaClusterSize", 20}, {"minCTAs", 24}, {"maxCTAs", 28},
		{"netName", 32}, {"splitShare", 40}, {"trafficClass", 44}, {"commName", 48},
		{"collnetEnable", 56}, {"CTAPolicy", 60}, {"shrinkShare", 64}, {"nvlsCTAs", 68},
		{"nChannelsPerNetPeer", 72}, {"nvlinkCentricSched", 76},
		{"sizeof(ncclUniqueId)", 128},
	}
	got := ConfigLayout()
	for i, w := range want {
		if got[i] != w.v {
			t.Errorf("%s = %d, want %d", w.name, got[i], w.v)
		}
	}
	if len(UniqueID{}) != got[17] {
		t.Errorf("Go UniqueID has %d bytes, C ncclUniqueId %d", len(UniqueID{}), got[17])
	}
	if ConfigVersion != Version(2, 28, 3) {
		t.Errorf("ConfigVersion %d does not match the 2.28.3 layout", ConfigVersion)
	}
}
