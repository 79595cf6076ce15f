package cuda

import (
	"fmt"
	"os"
	"sync"

	"github.com/symmem/symmem/internal/native/libnccl"
)

// ncclState is the backend's NCCL library (or why there is none).
type ncclState struct {
	nvls string // how NCCL_NVLS_ENABLE was decided
	lib  *libnccl.Lib
	err  error

	mu      sync.Mutex
	created bool   // a communicator was created: NCCL has read its parameters
	connect string // how NCCL_RUNTIME_CONNECT was decided ("" until a group spanned hosts)
}

// spanHosts is called by a group whose ranks sit on several hosts, before
// its communicators exist. Since 2.22 NCCL connects a communicator's peers
// at its first collective (NCCL_RUNTIME_CONNECT=1), inside the enqueueing
// call: a rank that exits before that collective leaves its peers blocked
// there, on the host, where aborting the communicator from the presence
// watcher would wait for the blocked call. With NCCL_RUNTIME_CONNECT=0 every
// communicator connects in its init, which the rendezvous bounds; later
// calls only enqueue, and the kernels waiting for a gone rank end when the
// watcher aborts them. NCCL reads the variable once, at the first
// communicator, so it is set only if no communicator exists yet — the
// world group, set up first, spans hosts whenever any group does — and a
// value the user set is kept.
func (s *ncclState) spanHosts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connect != "" {
		return
	}
	v, set := os.LookupEnv(envRuntimeConnect)
	s.connect = runtimeConnect(v, set, s.created)
	if !set && !s.created {
		os.Setenv(envRuntimeConnect, "0") // before NCCL reads it; reaches C's environ (cgo)
	}
}

const envRuntimeConnect = "NCCL_RUNTIME_CONNECT"

// runtimeConnect says how NCCL_RUNTIME_CONNECT is decided for a job whose
// groups span hosts: the user's value (v, set), else 0 unless NCCL already
// read its default (created).
func runtimeConnect(v string, set, created bool) string {
	switch {
	case set && v != "0":
		return fmt.Sprintf("%s=%s (set by the user, kept: a rank that exits before a group's first NCCL call can leave the others blocked in it)", envRuntimeConnect, v)
	case set:
		return envRuntimeConnect + "=0 (set by the user, kept)"
	case created:
		return envRuntimeConnect + " unset and a communicator existed before the first group that spans hosts: NCCL connects peers at the first call (set " + envRuntimeConnect + "=0 to connect at creation)"
	default:
		return envRuntimeConnect + "=0 set by symmem (groups span hosts: communicators connect at creation, so a rank's exit cannot block its peers inside a call)"
	}
}

// creating notes that a communicator is about to be created (NCCL reads
// its parameters then).
func (s *ncclState) creating() {
	s.mu.Lock()
	s.created = true
	s.mu.Unlock()
}

// load loads NCCL. Unless multicast is set, NVLink multicast (NVLS) stays
// off: NCCL_NVLS_ENABLE=0 is set when the variable is unset — a value the
// user set is kept — and status says which (symmem doctor prints it). NVLS
// reserves multicast memory per communicator and symmem's paths do not use
// it; on shared hosts it has failed communicator creation.
func (s *ncclState) load(multicast bool) {
	v, set := os.LookupEnv("NCCL_NVLS_ENABLE")
	switch {
	case set:
		s.nvls = fmt.Sprintf("NCCL_NVLS_ENABLE=%s (set by the user, kept)", v)
	case multicast:
		s.nvls = "NCCL_NVLS_ENABLE unset: NCCL's default (NVLink multicast allowed by symmem.Options.GPU.NCCLMulticast)"
	default:
		os.Setenv("NCCL_NVLS_ENABLE", "0") // before NCCL reads it; reaches C's environ (cgo)
		s.nvls = "NCCL_NVLS_ENABLE=0 set by symmem (it was unset; symmem.Options.GPU.NCCLMulticast allows NVLink multicast)"
	}
	s.lib, s.err = libnccl.Load()
}

// version is the loaded NCCL's ncclGetVersion (0 without NCCL).
func (s *ncclState) version() int {
	if s.lib == nil {
		return 0
	}
	return s.lib.Version
}

func (s *ncclState) status() string {
	if s.lib == nil {
		return fmt.Sprintf("unavailable: %v", s.err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connect != "" {
		return s.lib.String() + "; " + s.nvls + "; " + s.connect
	}
	return s.lib.String() + "; " + s.nvls
}
