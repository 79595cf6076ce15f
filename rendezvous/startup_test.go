package rendezvous

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBootstrapStartupErrors: a job that cannot meet fails at once, and the
// error says what is wrong and what to change, not another cause.
func TestBootstrapStartupErrors(t *testing.T) {
	held := func(t *testing.T) (net.Listener, int) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, ln.Addr().(*net.TCPAddr).Port
	}
	cases := []struct {
		name string
		// setup returns this rank's Env; rank 0 hosts the store at
		// MASTER_ADDR:StorePort, the others dial it.
		setup  func(t *testing.T) Env
		want   []string
		reject []string
	}{
		{
			// MASTER_ADDR is not an address of rank 0's machine (another
			// node's, or a typo): the port is not the problem.
			name: "master addr not on rank 0's host",
			setup: func(t *testing.T) Env {
				return Env{Rank: 0, WorldSize: 2, LocalWorldSize: 1, MasterAddr: "192.0.2.1", MasterPort: 29500, StorePort: 29501, Token: "tok", JobID: "j"}
			},
			want:   []string{"MASTER_ADDR=192.0.2.1", "rank 0's host"},
			reject: []string{"choose a free one"},
		},
		{
			name: "store port in use",
			setup: func(t *testing.T) Env {
				_, p := held(t)
				return Env{Rank: 0, WorldSize: 2, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 1, StorePort: p, Token: "tok", JobID: "j"}
			},
			want: []string{"in use", "another job", VarStorePort},
		},
		{
			// Two torchrun jobs whose store ports meet: rank 1 of the second
			// reaches the first job's store, whose token is derived from
			// another run id. There is no SYMMEM_TOKEN to check.
			name: "another job's store at the port",
			setup: func(t *testing.T) Env {
				s, err := NewServer("127.0.0.1:0", "first-job")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				p := s.ln.Addr().(*net.TCPAddr).Port
				return Env{Rank: 1, WorldSize: 2, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 1, StorePort: p,
					Token: "second-job", JobID: "j", TokenFrom: VarRunID}
			},
			want: []string{"another job", VarRunID, VarStorePort},
		},
		{
			// Something else (here an HTTP server) answers on the store's
			// port: no retry turns it into symmem's store.
			name: "foreign server at the port",
			setup: func(t *testing.T) Env {
				ln, p := held(t)
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
						c.Close()
					}
				}()
				return Env{Rank: 1, WorldSize: 2, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: 1, StorePort: p, Token: "tok", JobID: "j"}
			},
			want: []string{"not a symmem store", VarStorePort},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			_, cleanup, err := Bootstrap(ctx, e)
			if err == nil {
				cleanup()
				t.Fatal("Bootstrap succeeded")
			}
			if el := time.Since(start); el > time.Second {
				t.Errorf("failed after %v, want at once: %v", el.Round(time.Millisecond), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			for _, w := range tc.reject {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error says %q, which is not the problem: %v", w, err)
				}
			}
			if errors.Is(err, ErrUnreachable) && tc.name != "foreign server at the port" {
				t.Errorf("error wraps ErrUnreachable: %v", err)
			}
		})
	}
}
