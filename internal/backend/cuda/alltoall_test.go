package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/internal/members"
)

// TestAllToAllHasNoGPUPath: until the GPU paths exist, every form of
// all-to-all is refused before anything is enqueued, and Explain says why.
func TestAllToAllHasNoGPUPath(t *testing.T) {
	g := &Group{Head: members.Head{GroupName: "g"}}
	for _, f := range []backend.SplitForm{backend.SplitsEqual, backend.SplitsHost, backend.SplitsDevice} {
		req := backend.Request{Kind: coll.AllToAll, DType: coll.Float32, Count: 4, A2A: backend.Splits{Form: f}}
		_, err := g.Run(context.Background(), req)
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "all-to-all has no GPU path yet") {
			t.Errorf("%v: Run = %v, want ErrNotSupported saying there is no GPU path", f, err)
		}
		if p := g.Explain(req); !strings.Contains(p.Reason, "no GPU path") {
			t.Errorf("%v: Explain = %v", f, p)
		}
	}
}
