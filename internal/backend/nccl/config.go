package nccl

import (
	"context"
	"errors"
	"fmt"
	"github.com/symmem/symmem/internal/errs"
	"time"

	"github.com/symmem/symmem/internal/native/libnccl"
)

// ErrNotWindow is this package's own sentinel; the others it wraps are
// internal/errs's and libnccl.ErrTimeout (a peer did not arrive in time).
var ErrNotWindow = errors.New("nccl: buffer is not inside a registered window")

// Store is the part of the rendezvous client a Comm needs to exchange the
// NCCL unique id; *rendezvous.Client satisfies it. Wait must honour ctx's
// deadline.
type Store interface {
	Set(ctx context.Context, key string, val []byte) error
	Wait(ctx context.Context, keys ...string) ([][]byte, error)
	Add(ctx context.Context, key string, delta int64) (int64, error)
	Delete(ctx context.Context, key string) error
}

// CTAPolicy is ncclConfig_t.CTAPolicy. The zero value leaves NCCL's default.
type CTAPolicy int

const (
	CTAPolicyUnset      CTAPolicy = iota // NCCL's choice (NCCL_CTA_POLICY env or default)
	CTAPolicyDefault                     // NCCL_CTA_POLICY_DEFAULT
	CTAPolicyEfficiency                  // NCCL_CTA_POLICY_EFFICIENCY: fewer CTAs
	CTAPolicyZero                        // NCCL_CTA_POLICY_ZERO: copy-engine collectives (NCCL >= 2.28)
)

var ctaNames = [...]string{"unset", "default", "efficiency", "zero"}

func (p CTAPolicy) String() string {
	if p >= 0 && int(p) < len(ctaNames) {
		return ctaNames[p]
	}
	return fmt.Sprintf("ctapolicy(%d)", int(p))
}

// Config is what a group may tune in its communicator. The zero value is
// NCCL's defaults with a blocking communicator.
type Config struct {
	// NonBlocking makes the communicator non-blocking (ncclConfig_t.blocking
	// = 0): init, registration and finalize can then be abandoned at the
	// timeout even when a peer dies half-way. The price: NCCL 2.28 starts a
	// thread for every collective on such a communicator and reports it in
	// progress, so each call costs tens of microseconds of host time (Wait
	// polls it). The default, blocking, relies on the store exchange before
	// init and on the pool's verified registration order to catch a missing
	// rank before NCCL is entered; a rank dying inside NCCL's init or
	// registration still hangs its peers there (as with torch's default).
	NonBlocking bool
	CTAPolicy   CTAPolicy
	MinCTAs     int    // 0 = NCCL's default
	MaxCTAs     int    // 0 = NCCL's default
	NVLSCTAs    int    // 0 = NCCL's default (NVLS itself stays off: NCCL_NVLS_ENABLE=0)
	Name        string // ncclConfig_t.commName; "" = "symmem:<group>"
}

// native builds the ncclConfig_t fields.
func (c Config) native(group string) (libnccl.Config, error) {
	n := libnccl.DefaultConfig()
	n.Blocking = 1
	if c.NonBlocking {
		n.Blocking = 0
	}
	switch c.CTAPolicy {
	case CTAPolicyUnset:
	case CTAPolicyDefault:
		n.CTAPolicy = libnccl.CTAPolicyDefault
	case CTAPolicyEfficiency:
		n.CTAPolicy = libnccl.CTAPolicyEfficiency
	case CTAPolicyZero:
		n.CTAPolicy = libnccl.CTAPolicyZero
	default:
		return n, fmt.Errorf("nccl: config: unknown CTAPolicy %d (use CTAPolicyUnset, Default, Efficiency or Zero)", int(c.CTAPolicy))
	}
	for _, f := range []struct {
		name string
		v    int
		dst  *int
	}{{"MinCTAs", c.MinCTAs, &n.MinCTAs}, {"MaxCTAs", c.MaxCTAs, &n.MaxCTAs}, {"NVLSCTAs", c.NVLSCTAs, &n.NVLSCTAs}} {
		if f.v < 0 {
			return n, fmt.Errorf("nccl: config: %s = %d must be >= 0 (0 = NCCL's default)", f.name, f.v)
		}
		if f.v > 0 {
			*f.dst = f.v
		}
	}
	n.CommName = c.Name
	if n.CommName == "" {
		n.CommName = "symmem:" + group
	}
	return n, n.Validate()
}

// Options create one communicator.
type Options struct {
	GroupName  string        // group name, e.g. "world", "tp0" (namespaces store keys)
	Generation uint64        // bump when a group of the same name is created again
	Rank, Size int           // this rank's index in the group, and the group size
	Context    uint64        // CUcontext of this rank's device (cuda.Context.Handle()); 0 = current
	Store      Store         // rendezvous store shared by the group's ranks
	Timeout    time.Duration // bound on every wait (store, init, registration); > 0
	Config     Config
	Lib        *libnccl.Lib // nil: libnccl.Load()
}

func (o *Options) check() error {
	switch {
	case o.GroupName == "":
		return errors.New("nccl: Options.GroupName is empty: name the group (it namespaces the store keys)")
	case o.Size < 1:
		return fmt.Errorf("nccl: Options.Size = %d: a group needs at least one rank", o.Size)
	case o.Rank < 0 || o.Rank >= o.Size:
		return fmt.Errorf("nccl: Options.Rank = %d is outside the group of %d ranks", o.Rank, o.Size)
	case o.Store == nil:
		return errors.New("nccl: Options.Store is nil: pass the job's rendezvous client")
	case o.Timeout <= 0:
		return fmt.Errorf("nccl: Options.Timeout is %v: it bounds every wait and must be > 0: %w", o.Timeout, errs.Invalid)
	}
	return nil
}

// keyPrefix namespaces the store keys of one communicator.
func keyPrefix(group string, gen uint64) string {
	return fmt.Sprintf("symmem/nccl/%s/%d/", group, gen)
}
