package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// exitTimeout bounds how long a hosting rank 0 waits, in its cleanup, for the
// other ranks to finish with the store; failedExit replaces it once the job
// is known to have failed (Client.Failed), when some ranks may never come.
const (
	exitTimeout = 30 * time.Second
	failedExit  = time.Second
)

// Failed tells Bootstrap's cleanup that the job failed (a peer died or a
// collective timed out): it then waits at most a second for the other ranks
// in the exit barrier and for their connections to close, instead of 30 s.
func (c *Client) Failed() { c.failed.Store(true) }

func (c *Client) exitWait() time.Duration {
	if c.failed.Load() {
		return failedExit
	}
	return exitTimeout
}

// Bootstrap connects this rank to the job's store. When a launcher hosts it
// (e.Store, from SYMMEM_STORE) every rank dials it; otherwise rank 0 hosts the
// store at MASTER_ADDR:e.StorePort (SYMMEM_PORT, default MASTER_PORT+1: never
// MASTER_PORT, which torch's store owns) and the others dial it. Dial retries until ctx's deadline (DefaultCallTimeout without
// one), since ranks start at different times.
//
// cleanup closes the client. When rank 0 hosts, every rank's cleanup first
// meets in an exit barrier (at most 30 s, 1 s after Client.Failed) so rank 0
// does not stop the store while others still use it; then rank 0 stops its
// server once every other authenticated client has hung up.
func Bootstrap(ctx context.Context, e Env) (*Client, func() error, error) {
	if e.Token == "" {
		return nil, nil, fmt.Errorf("%w: SYMMEM_TOKEN is empty", ErrBadEnv)
	}
	if e.WorldSize <= 0 || e.Rank < 0 || e.Rank >= e.WorldSize {
		return nil, nil, fmt.Errorf("%w: rank %d of world size %d", ErrBadEnv, e.Rank, e.WorldSize)
	}
	hosted := e.Store != ""
	if !hosted && (e.StorePort <= 0 || e.StorePort == e.MasterPort) {
		return nil, nil, fmt.Errorf("%w: no port for symmem's store (set %s or %s)", ErrBadEnv, VarStore, VarStorePort)
	}
	addr := e.SymmemStore()
	var srv *Server
	if !hosted && e.Rank == 0 {
		s, err := NewServer(addr, e.Token)
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			return nil, nil, fmt.Errorf("rendezvous: rank 0 hosts symmem's store on port %d (MASTER_PORT+1 unless %s is set), which is in use: another job or program holds it (two jobs on one machine need MASTER_PORTs at least 2 apart); choose a free one with %s: %w",
				e.StorePort, VarStorePort, VarStorePort, err)
		case errors.Is(err, syscall.EADDRNOTAVAIL) || errors.As(err, &dnsErr) && dnsErr.IsNotFound: // a resolver failure keeps its own text
			return nil, nil, fmt.Errorf("rendezvous: rank 0 hosts symmem's store at %s=%s, which is not an address of this machine: set %s to a name or address of rank 0's host, the same on every rank: %w",
				VarMasterAddr, e.MasterAddr, VarMasterAddr, err)
		case err != nil:
			return nil, nil, fmt.Errorf("rendezvous: rank 0 hosts symmem's store on port %d (MASTER_PORT+1 unless %s is set; choose a free one with %s): %w",
				e.StorePort, VarStorePort, VarStorePort, err)
		}
		srv = s
		addr = s.Addr()
	}
	c, err := Dial(ctx, addr, e.Token)
	if errors.Is(err, ErrTokenRefused) {
		// The store is there but not this job's: another job's store on
		// the same port, or ranks that disagree on the token.
		var hint string
		switch {
		case hosted:
			hint = fmt.Sprintf("%s names another job's store, or %s differs from the launcher's: start every rank from one launcher", VarStore, VarToken)
		case e.TokenFrom == VarRunID:
			hint = fmt.Sprintf("another job's store holds the port (give each job its own MASTER_PORT, at least 2 apart, or %s), or the ranks differ in %s, %s or %s (the token derives from them)",
				VarStorePort, VarRunID, VarMasterAddr, VarMasterPort)
		default:
			hint = fmt.Sprintf("another job's store holds the port (give each job its own MASTER_PORT, at least 2 apart, or %s), or the ranks differ in %s", VarStorePort, VarToken)
		}
		err = fmt.Errorf("%w: the store at %s is not this job's: %s", ErrTokenRefused, addr, hint)
	}
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, nil, fmt.Errorf("rendezvous: rank %d bootstrap: %w", e.Rank, err)
	}
	if err := checkJob(ctx, c, e); err != nil {
		c.Close()
		if srv != nil {
			srv.Close()
		}
		return nil, nil, fmt.Errorf("rendezvous: rank %d bootstrap: %w", e.Rank, err)
	}
	cleanup := func() error {
		var err error
		// One bound for the barrier and the drain together.
		deadline := time.Now().Add(c.exitWait())
		if !hosted {
			bctx, cancel := context.WithDeadline(context.Background(), deadline)
			err = c.Barrier(bctx, "symmem/exit/"+e.JobID, e.WorldSize)
			cancel()
			if err != nil {
				err = fmt.Errorf("rendezvous: rank %d cleanup: %w", e.Rank, err)
			}
		}
		c.Close()
		if srv != nil {
			// The last rank to reach the barrier may not have read its
			// reply yet: stop the store once every client hung up.
			dctx, cancel := context.WithDeadline(context.Background(), deadline)
			srv.Drain(dctx)
			cancel()
			srv.Close()
		}
		return err
	}
	return c, onceErr(cleanup), nil
}

func onceErr(f func() error) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = f() })
		return err
	}
}
