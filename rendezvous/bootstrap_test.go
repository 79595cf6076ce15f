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
					env[VarStore] = "127.0.0.1:" + strconv.Itoa(port)
					env["MASTER_PORT"] = "1" // torch's, unused by symmem
				} else {
					env[VarStorePort] = strconv.Itoa(port)
					env["MASTER_PORT"] = "1"
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

// holdPort stands in for torchrun's agent store: a real listener on
// MASTER_PORT that accepts connections and never answers.
func holdPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBootstrapTorchrun: with only torchrun's variables (no SYMMEM_*) and a
// foreign server holding MASTER_PORT, a 2-rank job meets on its own store.
func TestBootstrapTorchrun(t *testing.T) {
	var port int
	for { // MASTER_PORT+1 must be free for rank 0's store
		port = holdPort(t)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+1)); err == nil {
			ln.Close()
			break
		}
	}
	const n = 2
	run := "run-" + NewJobID()
	for r := n - 1; r >= 0; r-- {
		env := rankEnv(r, n, "127.0.0.1", port, "", "")
		env[VarRunID] = run
		env["TORCHELASTIC_USE_AGENT_STORE"] = "True"
		env["GROUP_RANK"] = "0"
		cmd, out := startRole(t, "bootstrap", env)
		defer func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("rank %d: %v\n%s", r, err, out)
			}
		}()
	}
}
