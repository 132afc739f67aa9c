package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/oecp/oecp/engine/harness"
	"github.com/oecp/oecp/engine/harness/sandbox"
	"github.com/oecp/oecp/store/sqlite"
	"github.com/spf13/pflag"
)

// agentConfig is how `oecp serve` confines agent executions.
type agentConfig struct {
	unconfined bool
	allowPorts []string
	maxProcs   limitFlag
	maxMemory  limitFlag
	maxDisk    limitFlag
	uidRange   string
	// networksAhead is --agent-networks-ahead (sandbox.Config's
	// NetworksAhead, with 0 meaning none).
	networksAhead int
	// hide lists the serve flags' files (auth, TLS) no agent may see.
	hide []string

	ports []int
	uids  sandbox.UIDRange
}

func (a *agentConfig) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&a.unconfined, "agent-unconfined", false, "run agents without a sandbox, as the server's user beside it (they can read everything it can); logged at WARN")
	fs.StringArrayVar(&a.allowPorts, "agent-allow-port", nil, "host loopback `PORT` agents may reach, inside their sandbox at 127.0.0.1:PORT (repeatable; e.g. a local model gateway)")
	a.maxProcs = limitFlag{n: sandbox.DefaultMaxProcs}
	a.maxMemory = limitFlag{n: sandbox.DefaultMaxMemory, bytes: true}
	a.maxDisk = limitFlag{n: sandbox.DefaultMaxDisk, bytes: true}
	fs.Var(&a.maxProcs, sandbox.LimitProcs, "processes and threads at most per agent execution (cgroup pids; 0 or none: no bound; the default applies where the host can enforce it)")
	fs.Var(&a.maxMemory, sandbox.LimitMemory, "memory at most per agent execution, with an optional K, M or G suffix (cgroup memory, its /tmp included; 0 or none: no bound; the default applies where the host can enforce it)")
	fs.Var(&a.maxDisk, sandbox.LimitDisk, "disk a run's workspace, git directory and an execution's home may take, with an optional K, M or G suffix, measured while an agent runs (0 or none: no bound)")
	fs.IntVar(&a.networksAhead, "agent-networks-ahead", sandbox.DefaultNetworksAhead, "network namespaces (each with its pasta, about 36 MB) a root server keeps made ahead for the next runs, made at idle priority from the server's start (0: none; each run then makes its own at its start)")
	fs.StringVar(&a.uidRange, "agent-uid-range", "", "`FROM-TO` UIDs agents run under when the server is root (default "+fmt.Sprintf("%d-%d", sandbox.DefaultUIDs.From, sandbox.DefaultUIDs.To)+", leased host-wide)")
}

func (a *agentConfig) validate() error {
	a.ports = nil
	for _, p := range a.allowPorts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--agent-allow-port %q: want a port 1..65535", p)
		}
		a.ports = append(a.ports, n)
	}
	if a.networksAhead < 0 {
		return fmt.Errorf("--agent-networks-ahead %d: want 0 or more", a.networksAhead)
	}
	if a.uidRange != "" {
		r, err := sandbox.ParseUIDRange(a.uidRange)
		if err != nil {
			return fmt.Errorf("--agent-uid-range: %w", err)
		}
		a.uids = r
	}
	return nil
}

// networksAhead is --agent-networks-ahead n as sandbox.Config's
// NetworksAhead, where 0 is the default and none is negative.
func networksAhead(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// byteSuffixes are the multipliers --agent-max-memory and --agent-max-disk
// accept.
var byteSuffixes = map[string]int64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

// parseBytes reads N with an optional K, M or G (binary) suffix.
func parseBytes(s string) (int64, error) {
	num := strings.TrimRight(strings.ToUpper(s), "KMG")
	mul := byteSuffixes[strings.ToUpper(s)[len(num):]]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || mul == 0 || n > (1<<62)/mul {
		return 0, errors.New("want a byte count like 536870912 or 512M, or 0 or none for no bound")
	}
	return n * mul, nil
}

// host builds the host's agent sandbox for a server with a harness
// file. It hides from every agent the data directory, the server's home
// and every file a flag names.
func (a *agentConfig) host(cfg backendConfig, h *harness.Config, log *slog.Logger) (*sandbox.Host, error) {
	if a.unconfined {
		log.Warn("agents run unconfined (--agent-unconfined): each agent can read what the server can, its environment included, and reach its port")
	}
	hide := append([]string{cfg.dataDir, cfg.harness, cfg.repos, cfg.workers}, a.hide...)
	if cfg.dataDir == "" && (cfg.store == "" || cfg.store == "sqlite") {
		if d, err := sqlite.DefaultDir(); err == nil {
			hide = append(hide, d)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		hide = append(hide, home)
	}
	// A model gateway a harness entry's baseUrl names on this host's
	// loopback is allowed as --agent-allow-port would allow it.
	ports := slices.Clone(a.ports)
	for _, p := range h.GatewayPorts() {
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	procs, memory, disk := a.limits(log)
	host, err := sandbox.New(sandbox.Config{Unconfined: a.unconfined, AllowPorts: ports, MaxProcs: procs, MaxMemory: memory, MaxDisk: disk,
		UIDs: a.uids, NetworksAhead: networksAhead(a.networksAhead), Hide: hide, Programs: h.Programs(), Commands: h.Commands(), Log: log})
	if err != nil {
		return nil, err
	}
	host.MakeNetworksAhead()
	if a.unconfined {
		log.Info("agent limits in force: none, agents run unconfined")
	} else {
		log.Info("agent limits in force", sandbox.LimitProcs, limitText(procs, false), sandbox.LimitMemory, limitText(memory, true), sandbox.LimitDisk, limitText(disk, true))
	}
	return host, nil
}

// limits are the bounds of each agent execution: a default the host
// cannot enforce is dropped with a WARN (a bound the operator gave makes
// the sandbox refuse to start instead).
func (a *agentConfig) limits(log *slog.Logger) (procs, memory, disk int64) {
	if a.unconfined {
		return 0, 0, 0
	}
	out := []int64{a.maxProcs.n, a.maxMemory.n, a.maxDisk.n}
	for i, f := range []struct {
		name string
		flag *limitFlag
	}{{sandbox.LimitProcs, &a.maxProcs}, {sandbox.LimitMemory, &a.maxMemory}, {sandbox.LimitDisk, &a.maxDisk}} {
		if f.flag.set || f.flag.n == 0 {
			continue
		}
		if err := sandbox.CanLimit(f.name); err != nil {
			log.Warn("agent limit not enforced: this host cannot enforce its default (pass --"+f.name+" 0 to say so, or give the server a cgroup it may write)",
				"limit", f.name, "default", limitText(f.flag.n, f.flag.bytes), "err", err)
			out[i] = 0
		}
	}
	return out[0], out[1], out[2]
}

// limitFlag is an agent limit flag: a count, or bytes with an optional K,
// M or G suffix; 0 or none for no bound. set records that the operator
// gave it.
type limitFlag struct {
	n     int64
	bytes bool
	set   bool
}

func (f *limitFlag) String() string { return limitText(f.n, f.bytes) }

func (f *limitFlag) Type() string {
	if f.bytes {
		return "BYTES"
	}
	return "N"
}

func (f *limitFlag) Set(s string) error {
	var n int64
	var err error
	switch {
	case strings.EqualFold(s, "none"):
	case f.bytes:
		n, err = parseBytes(s)
	default:
		if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 0 {
			err = errors.New("want a count, or 0 or none for no bound")
		}
	}
	if err != nil {
		return err
	}
	f.n, f.set = n, true
	return nil
}

// limitText shows a limit as its flag takes it: none, a count, or bytes
// in the largest suffix that divides them.
func limitText(n int64, bytes bool) string {
	switch {
	case n == 0:
		return "none"
	case !bytes:
		return strconv.FormatInt(n, 10)
	}
	for _, s := range []string{"G", "M", "K"} {
		if m := byteSuffixes[s]; n%m == 0 {
			return strconv.FormatInt(n/m, 10) + s
		}
	}
	return strconv.FormatInt(n, 10)
}
