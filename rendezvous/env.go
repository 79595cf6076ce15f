package rendezvous

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Env is one rank's view of the job, read from the torchrun-compatible
// environment plus SYMMEM_TOKEN and SYMMEM_JOB_ID.
type Env struct {
	Rank, WorldSize, LocalRank, LocalWorldSize int
	MasterAddr                                 string
	MasterPort                                 int
	Token, JobID                               string
	// ShareDevice is SYMMEM_SHARE_DEVICE=1: the job runs several ranks on
	// one GPU on purpose (`symmem launch --share-device`).
	ShareDevice bool
}

// Environment variable names.
const (
	VarRank           = "RANK"
	VarWorldSize      = "WORLD_SIZE"
	VarLocalRank      = "LOCAL_RANK"
	VarLocalWorldSize = "LOCAL_WORLD_SIZE"
	VarMasterAddr     = "MASTER_ADDR"
	VarMasterPort     = "MASTER_PORT"
	VarToken          = "SYMMEM_TOKEN"
	VarJobID          = "SYMMEM_JOB_ID"
	// VarStoreHosted=1 means the launcher hosts the store at
	// MASTER_ADDR:MASTER_PORT, so rank 0 dials it instead of hosting one.
	VarStoreHosted = "SYMMEM_STORE_HOSTED"
	// VarShareDevice=1 lets several ranks of the job use one GPU (symmem's
	// own paths only; NCCL needs a GPU per rank). Unset or 0: refused.
	VarShareDevice = "SYMMEM_SHARE_DEVICE"
)

// ErrBadEnv is wrapped by EnvFromOS errors.
var ErrBadEnv = errors.New("rendezvous: bad environment")

// EnvFromOS reads the environment of this process. The error names every
// missing or inconsistent variable at once.
func EnvFromOS() (Env, error) { return envFrom(os.LookupEnv) }

func envFrom(lookup func(string) (string, bool)) (Env, error) {
	var e Env
	var probs []string
	str := func(name string) string {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			probs = append(probs, name+" is not set")
			return ""
		}
		return v
	}
	num := func(name string, lo, hi int) int {
		v := str(name)
		if v == "" {
			return -1
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s=%q is not a number", name, v))
			return -1
		}
		if n < lo || n > hi {
			probs = append(probs, fmt.Sprintf("%s=%d is out of range [%d, %d]", name, n, lo, hi))
			return -1
		}
		return n
	}
	const maxRanks = 1 << 20
	e.Rank = num(VarRank, 0, maxRanks)
	e.WorldSize = num(VarWorldSize, 1, maxRanks)
	e.LocalRank = num(VarLocalRank, 0, maxRanks)
	e.LocalWorldSize = num(VarLocalWorldSize, 1, maxRanks)
	e.MasterAddr = str(VarMasterAddr)
	e.MasterPort = num(VarMasterPort, 1, 65535)
	e.Token = str(VarToken)
	e.JobID = str(VarJobID)
	if v, ok := lookup(VarShareDevice); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes":
			e.ShareDevice = true
		case "", "0", "false", "no":
		default:
			probs = append(probs, fmt.Sprintf("%s=%q: want 1 (ranks may share a GPU) or 0", VarShareDevice, v))
		}
	}
	if e.Rank >= 0 && e.WorldSize > 0 && e.Rank >= e.WorldSize {
		probs = append(probs, fmt.Sprintf("RANK=%d must be less than WORLD_SIZE=%d", e.Rank, e.WorldSize))
	}
	if e.LocalRank >= 0 && e.LocalWorldSize > 0 && e.LocalRank >= e.LocalWorldSize {
		probs = append(probs, fmt.Sprintf("LOCAL_RANK=%d must be less than LOCAL_WORLD_SIZE=%d", e.LocalRank, e.LocalWorldSize))
	}
	if e.LocalWorldSize > 0 && e.WorldSize > 0 && e.LocalWorldSize > e.WorldSize {
		probs = append(probs, fmt.Sprintf("LOCAL_WORLD_SIZE=%d must not exceed WORLD_SIZE=%d", e.LocalWorldSize, e.WorldSize))
	}
	if e.JobID != "" && strings.ContainsAny(e.JobID, "/\x00 \t\n") {
		probs = append(probs, fmt.Sprintf("SYMMEM_JOB_ID=%q may not contain '/', NUL or whitespace", e.JobID))
	}
	if len(probs) > 0 {
		return Env{}, fmt.Errorf("%w: %s (start ranks with 'symmem launch -n N prog' or torchrun, and set SYMMEM_TOKEN and SYMMEM_JOB_ID)",
			ErrBadEnv, strings.Join(probs, "; "))
	}
	return e, nil
}

// StoreAddr is MasterAddr:MasterPort.
func (e Env) StoreAddr() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// NewToken returns a fresh random job token (32 hex digits, 128 bits).
func NewToken() string { return randHex(16) }

// NewJobID returns a fresh random job id (16 hex digits).
func NewJobID() string { return randHex(8) }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand.Read never fails on Linux (Go >= 1.24)
	return hex.EncodeToString(b)
}
