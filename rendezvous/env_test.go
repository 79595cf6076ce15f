package rendezvous

import (
	"errors"
	"maps"
	"net"
	"strings"
	"testing"
)

func TestEnvFrom(t *testing.T) {
	full := map[string]string{
		"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "SYMMEM_TOKEN": "tok", "SYMMEM_JOB_ID": "job1",
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	// Accepted variants of full, and what each changes in the Env.
	accepted := []struct {
		name string
		env  map[string]string
		fix  func(*Env)
	}{
		{"ok", full, func(*Env) {}},
		{"share device off", with("SYMMEM_SHARE_DEVICE", "0"), func(*Env) {}},
		{"master host name", with("MASTER_ADDR", "node-0.cluster"), func(e *Env) { e.MasterAddr = "node-0.cluster" }},
		{"master ipv6", with("MASTER_ADDR", "::1"), func(e *Env) { e.MasterAddr = "::1" }},
		{"master ipv6 zone", with("MASTER_ADDR", "fe80::1%eth0"), func(e *Env) { e.MasterAddr = "fe80::1%eth0" }},
		{"store", with("SYMMEM_STORE", "10.0.0.5:29600"), func(e *Env) { e.Store, e.StorePort = "10.0.0.5:29600", 0 }},
		{"store ipv6", with("SYMMEM_STORE", "[::1]:65535"), func(e *Env) { e.Store, e.StorePort = "[::1]:65535", 0 }},
		{"store hosted", with("SYMMEM_STORE_HOSTED", "1"), func(e *Env) { e.Store, e.StorePort = "127.0.0.1:29500", 0 }},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			e, err := envFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			want := Env{Rank: 1, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 29500,
				Token: "tok", JobID: "job1", StorePort: 29501, TokenFrom: VarToken}
			tc.fix(&want)
			if e != want {
				t.Fatalf("got %+v want %+v", e, want)
			}
			if got, w := e.StoreAddr(), net.JoinHostPort(want.MasterAddr, "29500"); got != w {
				t.Fatalf("StoreAddr %q, want %q", got, w)
			}
			wantStore := want.Store
			if wantStore == "" {
				wantStore = net.JoinHostPort(want.MasterAddr, "29501")
			}
			if got := e.SymmemStore(); got != wantStore {
				t.Fatalf("SymmemStore %q, want %q", got, wantStore)
			}
		})
	}
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"nothing set", map[string]string{}, []string{"RANK is not set", "WORLD_SIZE is not set", "LOCAL_RANK is not set",
			"LOCAL_WORLD_SIZE is not set", "MASTER_ADDR is not set", "MASTER_PORT is not set", "SYMMEM_TOKEN is not set (nor TORCHELASTIC_RUN_ID"}},
		{"rank too big", with("RANK", "4"), []string{"RANK=4 must be less than WORLD_SIZE=4"}},
		{"local rank too big", with("LOCAL_RANK", "2"), []string{"LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2"}},
		{"local world too big", with("LOCAL_WORLD_SIZE", "8", "LOCAL_RANK", "0"), []string{"LOCAL_WORLD_SIZE=8 must not exceed WORLD_SIZE=4"}},
		{"non-numeric", with("RANK", "one", "MASTER_PORT", "http"), []string{`RANK="one" is not a number`, `MASTER_PORT="http" is not a number`}},
		{"negative", with("RANK", "-1"), []string{"RANK=-1 is out of range"}},
		{"port range", with("MASTER_PORT", "70000"), []string{"MASTER_PORT=70000 is out of range"}},
		{"zero world", with("WORLD_SIZE", "0"), []string{"WORLD_SIZE=0 is out of range"}},
		{"empty token", with("SYMMEM_TOKEN", ""), []string{"SYMMEM_TOKEN is not set"}},
		{"missing two", with("MASTER_ADDR", "<unset>", "SYMMEM_TOKEN", "<unset>"), []string{"MASTER_ADDR is not set", "SYMMEM_TOKEN is not set"}},
		{"store port is master port", with("SYMMEM_PORT", "29500"), []string{"SYMMEM_PORT=29500 equals MASTER_PORT"}},
		{"store port not a number", with("SYMMEM_PORT", "x"), []string{`SYMMEM_PORT="x" is not a port number`}},
		{"no port above master", with("MASTER_PORT", "65535"), []string{"MASTER_PORT=65535 leaves no port above it"}},
		{"bad store", with("SYMMEM_STORE", "nohostport"), []string{`SYMMEM_STORE="nohostport" is not host:port`, "set it to host:port"}},
		// A store address that no retry can reach fails here, not after
		// every rank retried Dial until its deadline.
		{"store without port", with("SYMMEM_STORE", "127.0.0.1:"), []string{`SYMMEM_STORE="127.0.0.1:" has port "", not a number in 1..65535`}},
		{"store named port", with("SYMMEM_STORE", "127.0.0.1:port"), []string{`SYMMEM_STORE="127.0.0.1:port" has port "port"`}},
		{"store port range", with("SYMMEM_STORE", "127.0.0.1:99999"), []string{`SYMMEM_STORE="127.0.0.1:99999" has port "99999"`}},
		{"store port zero", with("SYMMEM_STORE", "127.0.0.1:0"), []string{`SYMMEM_STORE="127.0.0.1:0" has port "0"`}},
		{"store colon", with("SYMMEM_STORE", ":"), []string{`SYMMEM_STORE=":" has port ""`}},
		{"store without host", with("SYMMEM_STORE", ":29600"), []string{`SYMMEM_STORE=":29600" has no host`}},
		{"store host with space", with("SYMMEM_STORE", "my host:29600"), []string{`SYMMEM_STORE="my host:29600" has host "my host", not a host name or IP address`}},
		// A port in MASTER_ADDR made the store "[127.0.0.1:29500]:29501".
		{"master with port", with("MASTER_ADDR", "127.0.0.1:29500"), []string{`MASTER_ADDR="127.0.0.1:29500" has a port (29500): set MASTER_ADDR=127.0.0.1,`, "MASTER_PORT"}},
		{"master ipv6 with port", with("MASTER_ADDR", "[::1]:29500"), []string{`MASTER_ADDR="[::1]:29500" has a port (29500): set MASTER_ADDR=::1,`}},
		{"master with port, store hosted", with("MASTER_ADDR", "127.0.0.1:29500", "SYMMEM_STORE_HOSTED", "1"), []string{`MASTER_ADDR="127.0.0.1:29500" has a port`}},
		{"master bracketed", with("MASTER_ADDR", "[::1]"), []string{`MASTER_ADDR="[::1]" is not a host name or IP address (write IPv6 without brackets`}},
		{"master not an address", with("MASTER_ADDR", "::1:29500"), []string{`MASTER_ADDR="::1:29500" is not a host name or IP address`}},
		// Rank 0 failed to host the store ("choose a free port") and every
		// other rank retried the lookup until its timeout.
		{"master with space", with("MASTER_ADDR", "node 0"), []string{`MASTER_ADDR="node 0" is not a host name or IP address`}},
		{"master with tab", with("MASTER_ADDR", "node\t0"), []string{`MASTER_ADDR="node\t0" is not a host name or IP address`}},
		{"two master addrs", with("MASTER_ADDR", "10.0.0.1,10.0.0.2"), []string{`MASTER_ADDR="10.0.0.1,10.0.0.2" is not a host name or IP address`}},
		{"bad job id", with("SYMMEM_JOB_ID", "a/b"), []string{"SYMMEM_JOB_ID"}},
		{"bad share device", with("SYMMEM_SHARE_DEVICE", "maybe"), []string{`SYMMEM_SHARE_DEVICE="maybe": want 1`}},
		{"bad host", with("SYMMEM_HOST", "a|b"), []string{`SYMMEM_HOST="a|b" may not contain '|'`}},
		{"host with space", with("SYMMEM_HOST", "a b"), []string{`SYMMEM_HOST="a b" may not contain`}},
	}
	t.Run("host identity", func(t *testing.T) {
		e, err := envFrom(func(k string) (string, bool) { v, ok := with("SYMMEM_HOST", " node-3 ")[k]; return v, ok })
		if err != nil || e.Host != "node-3" || e.HostID() != "host:node-3" {
			t.Fatalf("SYMMEM_HOST=node-3: got Host %q, HostID %q, %v", e.Host, e.HostID(), err)
		}
		e.Host = ""
		if id := e.HostID(); !strings.Contains(id, "/") || strings.HasPrefix(id, "host:") {
			t.Fatalf("without SYMMEM_HOST the identity is the machine's (hostname/boot id), got %q", id)
		}
	})
	t.Run("share device on", func(t *testing.T) {
		e, err := envFrom(func(k string) (string, bool) { v, ok := with("SYMMEM_SHARE_DEVICE", "1")[k]; return v, ok })
		if err != nil || !e.ShareDevice {
			t.Fatalf("SYMMEM_SHARE_DEVICE=1: got %+v, %v; want ShareDevice", e, err)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if !errors.Is(err, ErrBadEnv) {
				t.Fatalf("err = %v, want ErrBadEnv", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestEnvTorchrun: with only the variables torchrun sets, the token and job
// id derive from the run id and master address; symmem's store port is
// never MASTER_PORT; other jobs (another run id or port) get other tokens.
func TestEnvTorchrun(t *testing.T) {
	tr := map[string]string{
		"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
		"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "a1b2",
		"TORCHELASTIC_USE_AGENT_STORE": "True",
	}
	get := func(m map[string]string) Env {
		e, err := envFrom(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := get(tr)
	if e.Token == "" || len(e.JobID) != 16 || e.TokenFrom != VarRunID || e.StorePort != 29501 || e.Store != "" {
		t.Fatalf("torchrun env: %+v", e)
	}
	if got := e.SymmemStore(); got != "127.0.0.1:29501" {
		t.Fatalf("SymmemStore %q", got)
	}
	tr["RANK"] = "1"
	if e1 := get(tr); e1.Token != e.Token || e1.JobID != e.JobID {
		t.Fatalf("ranks derive different tokens: %+v vs %+v", e1, e)
	}
	for k, v := range map[string]string{"TORCHELASTIC_RUN_ID": "other", "MASTER_PORT": "29600"} {
		m := maps.Clone(tr)
		m[k] = v
		if o := get(m); o.Token == e.Token || o.JobID == e.JobID {
			t.Errorf("%s=%s: same token/job id as the first job", k, v)
		}
	}
	m := maps.Clone(tr)
	m["SYMMEM_TOKEN"] = "secret"
	if o := get(m); o.Token != "secret" || o.TokenFrom != VarToken {
		t.Errorf("SYMMEM_TOKEN must win over the derived token: %+v", o)
	}
}

// TestEnvDerivedValues pins the derived token and job id to fixed values:
// ranks of one job may run different builds of the library, and every one
// must derive the same (a change here splits jobs across versions).
func TestEnvDerivedValues(t *testing.T) {
	base := map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
		"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
	for _, c := range []struct {
		extra      map[string]string
		token, job string
	}{
		{map[string]string{"TORCHELASTIC_RUN_ID": "run42"}, "09a839f67958f7a1deb668d37455afd1", "9ff85fa483f9bd80"},
		{map[string]string{"SYMMEM_TOKEN": "tok"}, "tok", "3418acd9588d3801"},
	} {
		m := maps.Clone(base)
		maps.Copy(m, c.extra)
		e, err := envFrom(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
		if err != nil || e.Token != c.token || e.JobID != c.job {
			t.Errorf("%v: token %q job %q (%v), want %q %q", c.extra, e.Token, e.JobID, err, c.token, c.job)
		}
	}
}

func TestEnvFromOS(t *testing.T) {
	for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
		"MASTER_ADDR": "localhost", "MASTER_PORT": "1234", "SYMMEM_TOKEN": "t", "SYMMEM_JOB_ID": "j"} {
		t.Setenv(k, v)
	}
	e, err := EnvFromOS()
	if err != nil || e.MasterAddr != "localhost" || e.WorldSize != 1 {
		t.Fatalf("%+v %v", e, err)
	}
}

func TestNewTokenJobID(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b || len(a) != 32 {
		t.Fatalf("tokens %q %q", a, b)
	}
	if j := NewJobID(); len(j) != 16 || j == NewJobID() {
		t.Fatalf("job id %q", j)
	}
}
