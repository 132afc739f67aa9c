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
	maxProcs   int64
	maxMemory  string
	uidRange   string
	// hide lists the serve flags' files (auth, TLS) no agent may see.
	hide []string

	ports  []int
	memory int64
	uids   sandbox.UIDRange
}

func (a *agentConfig) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&a.unconfined, "agent-unconfined", false, "run agents without a sandbox, as the server's user beside it (they can read everything it can); logged at WARN")
	fs.StringArrayVar(&a.allowPorts, "agent-allow-port", nil, "host loopback `PORT` agents may reach, inside their sandbox at 127.0.0.1:PORT (repeatable; e.g. a local model gateway)")
	fs.Int64Var(&a.maxProcs, "agent-max-procs", 0, "`N` processes at most per agent execution (cgroup pids; 0: no bound)")
	fs.StringVar(&a.maxMemory, "agent-max-memory", "", "`BYTES` of memory at most per agent execution, with an optional K, M or G suffix (cgroup memory; default no bound)")
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
	if a.maxProcs < 0 {
		return fmt.Errorf("--agent-max-procs %d: want 0 (no bound) or more", a.maxProcs)
	}
	if a.maxMemory != "" {
		n, err := parseBytes(a.maxMemory)
		if err != nil {
			return fmt.Errorf("--agent-max-memory %q: %w", a.maxMemory, err)
		}
		a.memory = n
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

// byteSuffixes are the multipliers --agent-max-memory accepts.
var byteSuffixes = map[string]int64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

// parseBytes reads N with an optional K, M or G (binary) suffix.
func parseBytes(s string) (int64, error) {
	num := strings.TrimRight(strings.ToUpper(s), "KMG")
	mul := byteSuffixes[strings.ToUpper(s)[len(num):]]
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || mul == 0 || n > (1<<62)/mul {
		return 0, errors.New("want a byte count like 536870912 or 512M")
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
	return sandbox.New(sandbox.Config{Unconfined: a.unconfined, AllowPorts: ports, MaxProcs: a.maxProcs, MaxMemory: a.memory,
		UIDs: a.uids, Hide: hide, Programs: h.Programs(), Log: log})
}
