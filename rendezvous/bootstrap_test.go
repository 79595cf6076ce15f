package rendezvous

import (
	"net"
	"strconv"
	"testing"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestBootstrapProcesses(t *testing.T) {
	for _, hosted := range []bool{false, true} {
		t.Run("hosted="+strconv.FormatBool(hosted), func(t *testing.T) {
			const n = 3
			tok, job := NewToken(), NewJobID()
			port := freePort(t)
			if hosted {
				s, err := NewServer("127.0.0.1:0", tok)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				port = s.ln.Addr().(*net.TCPAddr).Port
			}
			for r := n - 1; r >= 0; r-- { // rank 0 last: the others must retry
				env := rankEnv(r, n, "127.0.0.1", port, tok, job)
				if hosted {
					env[VarStoreHosted] = "1"
				}
				cmd, out := startRole(t, "bootstrap", env)
				defer func() {
					if err := cmd.Wait(); err != nil {
						t.Errorf("rank %d: %v\n%s", r, err, out)
					}
				}()
			}
		})
	}
}
