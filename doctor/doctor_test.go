package doctor

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/symmem/symmem/pool"
)

// TestPoolJSONKeys: symmem_doctor's JSON (python's symmem.doctor())
// encodes Report.Pool as it is, so its keys are pool.Stats' tags; they
// were Go field names ("Reserved", "InUse") among snake_case keys.
func TestPoolJSONKeys(t *testing.T) {
	r := Report{Pool: pool.Stats{Reserved: 1, InUse: 1, Segments: 1, LiveBlocks: 1,
		Groups: []pool.GroupStats{{ID: 1, Name: "world", Registered: 1, RegisteredBytes: 1, OpenScopes: 1}}}}
	b, err := json.Marshal(r.Pool)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	groups, _ := got["groups"].([]any)
	if len(groups) != 1 {
		t.Fatalf("pool JSON %s: no \"groups\" list of one group", b)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, c := range []struct {
		what string
		obj  map[string]any
		want []string
	}{
		{"pool", got, []string{"reserved_bytes", "in_use_bytes", "pending_bytes", "peak_bytes", "segments", "live_blocks", "groups"}},
		{"pool group", groups[0].(map[string]any), []string{"id", "name", "registered_segments", "registered_bytes", "open_scopes"}},
	} {
		for k := range c.obj {
			if !snake.MatchString(k) {
				t.Errorf("%s JSON key %q is not snake_case like the rest of the doctor JSON: %s", c.what, k, b)
			}
		}
		for _, k := range c.want {
			if _, ok := c.obj[k]; !ok {
				t.Errorf("%s JSON has no key %q: %s", c.what, k, b)
			}
		}
	}
}
