package symmem

import (
	"context"
	"testing"

	"github.com/symmem/symmem/coll"
	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/agree"
)

func init() { roles["checked-store"] = roleCheckedStore }

// TestCheckedThroughStore: checked mode on a group without an in-band
// agreement (ranks on several hosts; here the CPU world with its agreement
// hidden) compares the record through the store before the call: a dtype
// difference is ErrMismatch from that exchange, and matching calls run.
func TestCheckedThroughStore(t *testing.T) {
	t.Parallel()
	expectOK(t, spawn(t, 2, "checked-store"))
}

// noAgreer is a backend group without an in-band agreement.
type noAgreer struct{ backend.Group }

func (noAgreer) Agreer() agree.Agreer { return nil }

func roleCheckedStore(ctx context.Context) error {
	o := testOptions()
	o.Checked = true
	w, err := Init(ctx, o)
	if err != nil {
		return err
	}
	defer w.Close()
	g := w.World()
	b, err := allocBufs(ctx, g, 4096)
	if err != nil {
		return err
	}
	g.bg = noAgreer{g.bg}
	dt := coll.Float32
	if w.Rank() == 1 {
		dt = coll.Int32
	}
	_, err = g.AllReduce(ctx, b.out.Span, b.in.Span, dt, coll.Sum)
	if err := expectErr("dtype mismatch", err, ErrMismatch, "(checked mode)", "rank 1", "int32", "float32"); err != nil {
		return err
	}
	return runCase(ctx, g, coll.AllReduce, coll.Float32, coll.Sum, "sym", 100, b, 5)
}
