package scripts_test

import (
	"strings"
	"testing"
)

// TestNoopStatusIsNoPath: hostcost.NOOP_STATUS, what the no-op
// library call of noop_copy returns, must be a path code no real call
// returns, so that the package's collective returns None and host_cost.py /
// gpu_torch.py cost can check the library was not called. When ll took
// path code 7, 15 (7 | staged) became Path(ll+staged): both scripts stopped with
// "the no-op copy of all_reduce called the library" (found by review).
func TestNoopStatusIsNoPath(t *testing.T) {
	out := python(t, "-c", `
import sys
sys.path[:0] = ["../python", "../python/bench"]
import hostcost
from symmem import _core
s = hostcost.NOOP_STATUS
print("NOOP_STATUS", s, "->", _core.PATHS.get(s), "ok" if _core.PATHS.get(s) is None and 0 <= s < 32 else "BAD")
`)
	if !strings.HasSuffix(strings.TrimSpace(out), " ok") {
		t.Errorf("NOOP_STATUS maps to a real path: %s", strings.TrimSpace(out))
	}
}
