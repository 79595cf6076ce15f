package rendezvous

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// Env is one rank's view of the job, read from the torchrun-compatible
// environment plus symmem's own variables (SYMMEM_TOKEN, SYMMEM_JOB_ID,
// SYMMEM_STORE, SYMMEM_PORT), which torchrun does not set.
//
// symmem never binds MASTER_PORT: under torchrun the agent's TCPStore holds
// it, and under `symmem launch` it is left free for torch's own
// init_process_group("env://"). The store lives at Store when a launcher
// hosts it, otherwise rank 0 hosts it at MASTER_ADDR:StorePort.
type Env struct {
	Rank, WorldSize, LocalRank, LocalWorldSize int
	MasterAddr                                 string
	MasterPort                                 int
	Token, JobID                               string
	// ShareDevice is SYMMEM_SHARE_DEVICE=1: the job runs several ranks on
	// one GPU on purpose (`symmem launch --share-device`).
	ShareDevice bool
	// Store is SYMMEM_STORE (host:port of a store a launcher hosts); empty
	// when rank 0 hosts the store itself.
	Store string
	// StorePort is where rank 0 hosts the store when Store is empty:
	// SYMMEM_PORT, or MASTER_PORT+1.
	StorePort int
	// TokenFrom says where Token came from: VarToken, or VarRunID when it
	// was derived from torchrun's run id (a job name, not a secret).
	TokenFrom string
	// AutoTable is SYMMEM_AUTO_TABLE: the file of the table the GPU
	// backend's auto reads when symmem.Options.GPU.AutoTable is empty.
	AutoTable string
	// Host is SYMMEM_HOST: the name of the host this rank acts as, for
	// ranks that share a machine but must act as separate hosts (`symmem
	// launch --hosts`, the multi-host test facility). Empty: the machine's
	// own identity (HostID).
	Host string
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
	// VarStore is host:port of a store a launcher hosts; every rank dials it.
	VarStore = "SYMMEM_STORE"
	// VarStorePort is the port rank 0 hosts the store on when VarStore is
	// unset (default MASTER_PORT+1).
	VarStorePort = "SYMMEM_PORT"
	// VarStoreHosted=1 means a test harness hosts the store at
	// MASTER_ADDR:MASTER_PORT itself (same as SYMMEM_STORE set to that).
	VarStoreHosted = "SYMMEM_STORE_HOSTED"
	// VarShareDevice=1 lets several ranks of the job use one GPU (symmem's
	// own paths only; NCCL needs a GPU per rank). Unset or 0: refused.
	VarShareDevice = "SYMMEM_SHARE_DEVICE"
	// VarAutoTable names an auto table file (`symmem tune`'s output) for
	// the GPU backend; symmem.Options.GPU.AutoTable, when set, wins.
	VarAutoTable = "SYMMEM_AUTO_TABLE"
	// VarHost names the host a rank acts as (Env.Host): ranks with
	// different names never share memory, as on separate machines. Unset:
	// the machine's hostname and boot id.
	VarHost = "SYMMEM_HOST"
	// VarRunID is torchrun's job name; with it, SYMMEM_TOKEN and
	// SYMMEM_JOB_ID may be left unset.
	VarRunID = "TORCHELASTIC_RUN_ID"
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
	if e.MasterAddr != "" {
		if err := checkHost(e.MasterAddr); err != nil {
			probs = append(probs, fmt.Sprintf("%s=%q %v", VarMasterAddr, e.MasterAddr, err))
		}
	}
	e.MasterPort = num(VarMasterPort, 1, 65535)
	opt := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	e.Token, e.JobID, e.TokenFrom = opt(VarToken), opt(VarJobID), VarToken
	if e.Token == "" {
		// Under torchrun: derive both from the run id and the master
		// address, which every worker of the job sees alike.
		if run := opt(VarRunID); run != "" && e.MasterAddr != "" && e.MasterPort > 0 {
			e.Token = DerivedToken(run, e.MasterAddr, e.MasterPort)
			e.TokenFrom = VarRunID
		} else {
			probs = append(probs, VarToken+" is not set (nor "+VarRunID+", which torchrun sets)")
		}
	}
	if e.JobID == "" && e.Token != "" {
		e.JobID = DerivedJobID(e.Token)
	}
	e.AutoTable = opt(VarAutoTable)
	if e.Host = opt(VarHost); strings.ContainsAny(e.Host, "|/\x00 \t\n") {
		probs = append(probs, fmt.Sprintf("%s=%q may not contain '|', '/', NUL or whitespace", VarHost, e.Host))
	}
	// Checked here, not left to Dial: every rank would retry an address
	// that cannot work until its deadline.
	if e.Store = opt(VarStore); e.Store != "" {
		host, _, err := splitStoreAddr(e.Store)
		if err == nil && host == "" {
			err = errors.New("has no host")
		}
		if err != nil {
			probs = append(probs, fmt.Sprintf("%s=%q %v: set it to host:port of the launcher's store, or unset it for rank 0 to host one", VarStore, e.Store, err))
		}
	} else if opt(VarStoreHosted) == "1" && e.MasterAddr != "" && e.MasterPort > 0 {
		e.Store = e.StoreAddr() // checked as MASTER_ADDR and MASTER_PORT
	}
	if e.Store == "" {
		if v := opt(VarStorePort); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				probs = append(probs, fmt.Sprintf("%s=%q is not a port number (1..65535)", VarStorePort, v))
			}
			e.StorePort = p
		} else if e.MasterPort > 0 {
			e.StorePort = e.MasterPort + 1
			if e.StorePort > 65535 {
				probs = append(probs, fmt.Sprintf("MASTER_PORT=%d leaves no port above it for symmem's store: set %s", e.MasterPort, VarStorePort))
			}
		}
	}
	if e.StorePort == e.MasterPort && e.Store == "" && e.MasterPort > 0 {
		probs = append(probs, fmt.Sprintf("%s=%d equals MASTER_PORT, which belongs to torch's store: pick another port", VarStorePort, e.StorePort))
	}
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
		return Env{}, fmt.Errorf("%w: %s (start ranks with 'symmem launch --nproc-per-node N prog' or torchrun)",
			ErrBadEnv, strings.Join(probs, "; "))
	}
	return e, nil
}

// checkHost reports what is wrong with host as MASTER_ADDR, a host name or
// IP address alone: a port in it (a common slip) would have every rank meet
// at "[host:port]:port+1".
func checkHost(host string) error {
	// No name or address holds these: a space, a comma-separated list.
	if strings.ContainsFunc(host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' || r == '/' }) {
		return errors.New("is not a host name or IP address (one name or address of rank 0's host, no spaces or lists)")
	}
	if !strings.Contains(host, ":") {
		if strings.ContainsAny(host, "[]") {
			return errors.New("is not a host name or IP address")
		}
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // bare IPv6
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		return fmt.Errorf("has a port (%s): set %s=%s, the host alone; the port goes in %s", p, VarMasterAddr, h, VarMasterPort)
	}
	return errors.New("is not a host name or IP address (write IPv6 without brackets, e.g. ::1)")
}

// splitStoreAddr splits host:port of a store and checks what
// net.SplitHostPort lets through: a port that is not a number in 1..65535
// ("h:", "h:0", "h:http") and a host with a colon that is no IPv6 address
// ("[h:port]:port", from a port in MASTER_ADDR).
func splitStoreAddr(addr string) (host string, port int, err error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("is not host:port: %w", err)
	}
	if strings.Contains(host, ":") {
		if _, err := netip.ParseAddr(host); err != nil {
			return "", 0, fmt.Errorf("has host %q, not a host name or IP address", host)
		}
	} else if checkHost(host) != nil {
		return "", 0, fmt.Errorf("has host %q, not a host name or IP address", host)
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("has port %q, not a number in 1..65535", ps)
	}
	return host, port, nil
}

// HostID identifies the host this rank runs on: ranks with equal IDs share
// memory (pages, file descriptors, GPU peer mappings). It is the machine's
// hostname and boot id, or "host:" and Env.Host where SYMMEM_HOST names one.
func (e Env) HostID() string {
	if e.Host != "" {
		return "host:" + e.Host
	}
	h, _ := os.Hostname()
	id, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + strings.TrimSpace(string(id))
}

// StoreAddr is MasterAddr:MasterPort (torch's store, never symmem's).
func (e Env) StoreAddr() string {
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.MasterPort))
}

// SymmemStore is the address of symmem's store: Store when a launcher hosts
// it, else MasterAddr:StorePort, where rank 0 hosts it.
func (e Env) SymmemStore() string {
	if e.Store != "" {
		return e.Store
	}
	return net.JoinHostPort(e.MasterAddr, strconv.Itoa(e.StorePort))
}

// derive hashes parts into 32 hex digits; the tag keeps tokens and job ids
// from different uses apart.
// DerivedToken is the job token a rank derives under torchrun (no
// SYMMEM_TOKEN): from the run id, the master address and port, which every
// worker of the job sees alike.
func DerivedToken(run, masterAddr string, masterPort int) string {
	return derive("token", run, masterAddr, strconv.Itoa(masterPort))
}

// DerivedJobID is the job id a rank derives from the token where
// SYMMEM_JOB_ID is not set.
func DerivedJobID(token string) string { return derive("job", token)[:16] }

func derive(tag string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte("symmem/v1/" + tag))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
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
