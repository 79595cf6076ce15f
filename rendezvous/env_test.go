package rendezvous

import (
	"errors"
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
	cases := []struct {
		name string
		env  map[string]string
		want []string // substrings of the error; nil = success
	}{
		{"ok", full, nil},
		{"nothing set", map[string]string{}, []string{"RANK is not set", "WORLD_SIZE is not set", "LOCAL_RANK is not set",
			"LOCAL_WORLD_SIZE is not set", "MASTER_ADDR is not set", "MASTER_PORT is not set", "SYMMEM_TOKEN is not set", "SYMMEM_JOB_ID is not set"}},
		{"rank too big", with("RANK", "4"), []string{"RANK=4 must be less than WORLD_SIZE=4"}},
		{"local rank too big", with("LOCAL_RANK", "2"), []string{"LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2"}},
		{"local world too big", with("LOCAL_WORLD_SIZE", "8", "LOCAL_RANK", "0"), []string{"LOCAL_WORLD_SIZE=8 must not exceed WORLD_SIZE=4"}},
		{"non-numeric", with("RANK", "one", "MASTER_PORT", "http"), []string{`RANK="one" is not a number`, `MASTER_PORT="http" is not a number`}},
		{"negative", with("RANK", "-1"), []string{"RANK=-1 is out of range"}},
		{"port range", with("MASTER_PORT", "70000"), []string{"MASTER_PORT=70000 is out of range"}},
		{"zero world", with("WORLD_SIZE", "0"), []string{"WORLD_SIZE=0 is out of range"}},
		{"empty token", with("SYMMEM_TOKEN", ""), []string{"SYMMEM_TOKEN is not set"}},
		{"missing two", with("MASTER_ADDR", "<unset>", "SYMMEM_JOB_ID", "<unset>"), []string{"MASTER_ADDR is not set", "SYMMEM_JOB_ID is not set"}},
		{"bad job id", with("SYMMEM_JOB_ID", "a/b"), []string{"SYMMEM_JOB_ID"}},
		{"share device off", with("SYMMEM_SHARE_DEVICE", "0"), nil},
		{"bad share device", with("SYMMEM_SHARE_DEVICE", "maybe"), []string{`SYMMEM_SHARE_DEVICE="maybe": want 1`}},
	}
	t.Run("share device on", func(t *testing.T) {
		e, err := envFrom(func(k string) (string, bool) { v, ok := with("SYMMEM_SHARE_DEVICE", "1")[k]; return v, ok })
		if err != nil || !e.ShareDevice {
			t.Fatalf("SYMMEM_SHARE_DEVICE=1: got %+v, %v; want ShareDevice", e, err)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := envFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				want := Env{Rank: 1, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 29500, Token: "tok", JobID: "job1"}
				if e != want {
					t.Fatalf("got %+v want %+v", e, want)
				}
				if e.StoreAddr() != "127.0.0.1:29500" {
					t.Fatalf("StoreAddr %q", e.StoreAddr())
				}
				return
			}
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
