package symmem

import (
	"testing"

	"github.com/symmem/symmem/coll"
)

func TestCollectOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []CallOption
		want callOpts
	}{
		{"none", nil, callOpts{algo: coll.AlgoAuto}},
		{"zero value changes nothing", []CallOption{{}}, callOpts{algo: coll.AlgoAuto}},
		{"algo", []CallOption{WithAlgo(coll.AlgoKernel)}, callOpts{algo: coll.AlgoKernel}},
		{"stream", []CallOption{WithStream(7)}, callOpts{algo: coll.AlgoAuto, stream: 7}},
		{"both", []CallOption{WithStream(7), WithAlgo(coll.AlgoCE)}, callOpts{algo: coll.AlgoCE, stream: 7}},
		{"later wins", []CallOption{WithStream(7), WithAlgo(coll.AlgoCE), WithStream(9), WithAlgo(coll.AlgoNCCL)},
			callOpts{algo: coll.AlgoNCCL, stream: 9}},
		{"stream 0 resets to the backend's", []CallOption{WithStream(7), WithStream(0)}, callOpts{algo: coll.AlgoAuto}},
	} {
		if got := collect(tc.opts); got != tc.want {
			t.Errorf("%s: collect = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestCallOptionsNoAllocs: making and applying options allocates nothing
// (the C ABI passes the caller's stream on every call).
func TestCallOptionsNoAllocs(t *testing.T) {
	var sink callOpts
	s := uint64(1)
	if n := testing.AllocsPerRun(100, func() {
		opts := [2]CallOption{WithAlgo(coll.AlgoKernel), WithStream(s)}
		sink = collect(opts[:])
	}); n != 0 {
		t.Errorf("options allocate %v times per call", n)
	}
	_ = sink
}
