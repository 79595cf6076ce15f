package symmem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/symmem/symmem/doctor"

	"github.com/symmem/symmem/internal/backend"
	"github.com/symmem/symmem/internal/backend/cuda"
	"github.com/symmem/symmem/internal/backend/shm"
	"github.com/symmem/symmem/internal/tune"
	"github.com/symmem/symmem/rendezvous"
)

// ResolveBackend turns an Options.Backend value into the backend Init
// starts: "cpu" or "cuda"; "auto" (or "") is "cuda" when this process can
// use a GPU (libcuda loads and a device with VMM and POSIX-fd handles is
// visible) and "cpu" otherwise, with why saying which. Init and the CLI
// both choose with it. An unknown name is ErrInvalid.
func ResolveBackend(name string) (kind, why string, err error) {
	switch strings.ToLower(name) {
	case "cpu":
		return "cpu", "asked for cpu", nil
	case "cuda":
		return "cuda", "asked for cuda", nil
	case "", "auto":
		if err := cuda.Usable(); err != nil {
			return "cpu", fmt.Sprintf("auto: no usable GPU (%v), CPU shared memory", err), nil
		}
		return "cuda", "auto: a usable GPU", nil
	}
	return "", "", fmt.Errorf("unknown backend %q (want \"auto\", \"cpu\" or \"cuda\"): %w", name, ErrInvalid)
}

// newBackend creates the backend ResolveBackend chose. When auto chose the
// GPU but the GPU backend still fails to start, auto falls back to the CPU
// backend and why says what the GPU backend reported; an auto table that
// does not load or fit this machine is an error either way (ErrInvalid:
// the user named it). auto says which table auto reads, machine what the
// tables record of this one.
func newBackend(name string, env rendezvous.Env, opts Options) (be backend.Backend, why string, auto doctor.AutoTable, machine doctor.Machine, err error) {
	kind, why, err := ResolveBackend(name)
	if err != nil {
		return nil, "", auto, machine, err
	}
	path, from := autoTableFile(opts, env)
	if kind == "cpu" {
		return shm.New(env), why, cpuAutoTable(path, from), doctor.Machine{Backend: "cpu"}, nil
	}
	var table *tune.Table
	if path != "" {
		if table, err = loadAutoTable(path); err != nil {
			return nil, "", auto, machine, fmt.Errorf("%s %s: %w", from, path, err)
		}
	}
	g := opts.GPU
	b, err := cuda.New(env, cuda.Options{Watchdog: g.Watchdog, NCCLMulticast: g.NCCLMulticast, ShareDevice: g.ShareDevice || env.ShareDevice,
		LowContentionCTAs: g.LowContentionCTAs, AutoTable: table})
	switch {
	case err == nil:
		_, builtin := b.AutoTable()
		auto = describeTable(builtin, "built-in")
		if table != nil {
			bi := auto
			auto = describeTable(table, path)
			auto.From, auto.Builtin = from, &bi
		}
		return b, fmt.Sprintf("%s: GPU %d of this host", why, b.Device().Ordinal), auto, doctorMachine(b.Machine()), nil
	case table != nil && errors.Is(err, ErrInvalid): // the table does not fit this GPU: not a reason to leave it; say which file
		return nil, "", auto, machine, fmt.Errorf("%s %s: %w", from, path, err)
	case strings.EqualFold(name, "cuda"): // errors.Is(err, ErrNotSupported) without a usable GPU
		return nil, "", auto, machine, fmt.Errorf("backend \"cuda\": %w", err)
	}
	return shm.New(env), fmt.Sprintf("auto: the GPU backend failed to start (%v), CPU shared memory", err), cpuAutoTable(path, from), doctor.Machine{Backend: "cpu"}, nil
}

// cpuAutoTable is what doctor says of auto's table on the CPU backend: it
// reads none, and a table named for this rank (path, from) is ignored.
func cpuAutoTable(path, from string) doctor.AutoTable {
	a := doctor.AutoTable{Note: "the cpu backend's auto has one path (direct): it reads no table"}
	if path != "" {
		a.Note += fmt.Sprintf("; %s=%s ignored", from, path)
	}
	return a
}

// autoTableFile is the auto table file named for this rank and what named
// it: Options.GPU.AutoTable, else SYMMEM_AUTO_TABLE (an explicit option is
// the program's choice and wins; the variable reaches jobs whose program
// sets no options, under torchrun), else none.
func autoTableFile(opts Options, env rendezvous.Env) (path, from string) {
	switch {
	case opts.GPU.AutoTable != "":
		return opts.GPU.AutoTable, "Options.GPU.AutoTable"
	case env.AutoTable != "":
		return env.AutoTable, rendezvous.VarAutoTable
	}
	return "", ""
}

// loadAutoTable reads and validates an auto table file.
func loadAutoTable(path string) (*tune.Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the caller names the file
		}
		return nil, fmt.Errorf("cannot read it: %w: %w", err, ErrInvalid)
	}
	t, err := tune.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return t, nil
}

// describeTable is t as doctor reports it.
func describeTable(t *tune.Table, source string) doctor.AutoTable {
	return doctor.AutoTable{Source: source, Sources: slices.Clone(t.Sources), Machine: doctorMachine(t.Machine), Date: t.Date,
		Command: t.Command, Note: t.Note, GraphRows: len(t.GraphRows)}
}

func doctorMachine(m tune.Machine) doctor.Machine {
	return doctor.Machine{Backend: m.Backend, GPU: m.GPU, Count: m.Count, Link: m.Link, Driver: m.Driver, NCCL: m.NCCL}
}
