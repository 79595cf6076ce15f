package backend

import (
	"strings"
	"testing"

	"github.com/symmem/symmem/rendezvous"
)

func TestGroupConfigIndex(t *testing.T) {
	st := &rendezvous.Client{}
	tests := []struct {
		name  string
		cfg   GroupConfig
		want  int
		error string
	}{
		{"member", GroupConfig{Name: "tp", Ranks: []int{0, 2, 5}, Rank: 5, Store: st}, 2, ""},
		{"world of one", GroupConfig{Name: "w", Ranks: []int{0}, Rank: 0, Store: st}, 0, ""},
		{"not a member", GroupConfig{Name: "tp", Ranks: []int{0, 2}, Rank: 1, Store: st}, -1, "rank 1 is not a member"},
		{"unsorted", GroupConfig{Name: "tp", Ranks: []int{2, 0}, Rank: 0, Store: st}, -1, "ascending without repeats"},
		{"repeat", GroupConfig{Name: "tp", Ranks: []int{0, 0}, Rank: 0, Store: st}, -1, "ascending without repeats"},
		{"no store", GroupConfig{Name: "tp", Ranks: []int{0, 1}, Rank: 0}, -1, "Store is nil"},
	}
	for _, tt := range tests {
		got, err := tt.cfg.Index()
		if got != tt.want || (tt.error == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.error)) {
			t.Errorf("%s: Index() = %d, %v; want %d, error containing %q", tt.name, got, err, tt.want, tt.error)
		}
	}
}
