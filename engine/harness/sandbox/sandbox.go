// Package sandbox confines the processes of agent executions by the
// kernel. Each execution's processes run under bubblewrap in their own
// mount, PID, IPC, UTS and network namespaces (and a user namespace when
// the server is not root): they see the host's system read-only, their
// workspace (read-write for a writer, read-only for a verifier), their
// run's git directory, their private home and a private /tmp; the server's
// data directory, configuration files and home are hidden, and /proc shows
// only their own processes. When the server is root each run's writers run
// under a UID leased host-wide for the run and each verifier execution
// under its own leased UID. The network namespace reaches the outside
// world through pasta, never the host's loopback except the ports the
// operator allows. Per-execution limits on processes and memory come from
// cgroup v1 groups beneath the server's own; the limit on disk is a watch
// that measures the run's directories while the execution runs. A
// harness program is shown where the operator installed it, or New
// refuses it; one an agent would not find fails to start, saying so.
// Every sandbox dies with its server: its outer process gets SIGKILL when
// the server dies, and its PID namespace's init takes every process of
// the sandbox with it.
package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrUnavailable is returned by New when the host cannot confine agents.
var ErrUnavailable = errors.New("agent sandbox unavailable")

// Programs the sandbox needs, and the Debian packages that ship them.
const (
	programBwrap   = "bwrap"   // bubblewrap
	programPasta   = "pasta"   // passt
	programSetpriv = "setpriv" // util-linux
)

// tunDevice is the device pasta makes the sandbox's interface with.
const tunDevice = "/dev/net/tun"

// accessReadWrite is access(2)'s R_OK|W_OK.
const accessReadWrite = 0o6

// Config is the host's agent sandbox configuration (oecp serve flags).
type Config struct {
	// Unconfined runs agents without a sandbox (--agent-unconfined): only
	// the parent-death signal ties them to the server.
	Unconfined bool
	// AllowPorts are host loopback ports reachable from inside every
	// sandbox at 127.0.0.1:PORT (--agent-allow-port).
	AllowPorts []int
	// MaxProcs and MaxMemory bound each execution (0: no bound);
	// --agent-max-procs and --agent-max-memory.
	MaxProcs  int64
	MaxMemory int64
	// MaxDisk bounds what a run's workspace, git directory and an
	// execution's home take on disk, measured while the execution runs
	// (0: no bound); --agent-max-disk.
	MaxDisk int64
	// UIDs is the range writer and verifier UIDs are leased from when the
	// server is root (zero: DefaultUIDs); --agent-uid-range.
	UIDs UIDRange
	// LeaseDir holds the host-wide UID lease files ("": DefaultLeaseDir).
	// Every server that leases from overlapping ranges must use the same
	// directory: a UID leased through another directory is not seen as
	// taken, and releasing it kills the other holder's processes.
	LeaseDir string
	// Hide lists paths no sandbox may see: the data directory, the
	// server's configuration files, its home. Missing paths are ignored.
	Hide []string
	// Programs are the harness programs and scripts (argv[0] of each
	// harness entry, and every absolute path in its argv): one installed
	// inside a hidden directory has its installation made visible,
	// read-only.
	Programs []string
	// Commands are the harness programs proper (argv[0] of each entry):
	// New fails (ErrHiddenProgram), naming it, when the sandbox cannot
	// show one, and logs a WARN when an agent's UID may not run it.
	Commands []string
	// NetworksAhead is how many network namespaces, each with its pasta,
	// a root server keeps made ahead for the next runs, from its first
	// run's Prepare or MakeNetworksAhead on (0: DefaultNetworksAhead;
	// negative: none);
	// --agent-networks-ahead.
	NetworksAhead int
	Log           *slog.Logger
}

// DefaultNetworksAhead is Config.NetworksAhead's default: two, so that
// a run that follows another at once finds one ready while the next is
// being made.
const DefaultNetworksAhead = 2

// Host confines agent executions. A nil *Host confines nothing.
type Host struct {
	cfg      Config
	log      *slog.Logger
	bwrap    string
	pasta    string
	setpriv  string
	root     bool
	hide     []string // directories shown as empty
	files    []string // files shown as empty
	expose   []string // directories (or files) inside hidden ones shown read-only
	explicit []string // the directories of cfg.Hide
	leases   *leases
	cg       *cgroups

	// noHuge is set once the kernel refused to start pasta on huge pages
	// (huge.go).
	noHuge atomic.Bool

	mu      sync.Mutex
	writers map[string]*lease
	nets    map[string][]*runNetwork // each run's free network namespaces
	making  map[string]chan struct{} // closed once Prepare's namespace is made
	leasing map[string]chan struct{} // closed once Prepare's writer lease is taken (or failed)
	// spares are the namespaces made ahead for the next runs' Prepare,
	// oldest first (runnet.go); while one more is being made, spareMade
	// is closed once it is and spareSched is its pasta's scheduling.
	spares     []*runNetwork
	spareMade  chan struct{}
	spareSched *aheadSched
	closed     bool
	spareWG    sync.WaitGroup

	// orphans are the sandbox inits without a bwrap parent at the last
	// sweep, by PID, with their start times (orphans.go).
	orphanMu sync.Mutex
	orphans  map[int]string
}

// New checks that this host can confine agents as cfg asks and returns
// the Host. With cfg.Unconfined it checks nothing. The error wraps
// ErrUnavailable and says what is missing.
func New(cfg Config) (*Host, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &Host{cfg: cfg, log: cfg.Log, writers: map[string]*lease{}, nets: map[string][]*runNetwork{}, making: map[string]chan struct{}{},
		leasing: map[string]chan struct{}{}}
	if cfg.Unconfined {
		return h, nil
	}
	var missing []string
	type program struct {
		name, pkg string
		dst       *string
	}
	needs := []program{{programBwrap, "bubblewrap", &h.bwrap}, {programPasta, "passt", &h.pasta}}
	if len(gateProgram) == 0 {
		// oecp-gate takes the agent's UID where it is built.
		needs = append(needs, program{programSetpriv, "util-linux", &h.setpriv})
	}
	for _, p := range needs {
		path, err := exec.LookPath(p.name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", p.name, p.pkg))
			continue
		}
		*p.dst = path
	}
	if h.pasta != "" {
		h.pasta = pastaProgram(h.pasta)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s; install them (.ci/install-deps does) or pass --agent-unconfined", ErrUnavailable, strings.Join(missing, ", "))
	}
	h.root = os.Geteuid() == 0
	if !h.root {
		// pasta opens the tap device as the server's user.
		if err := syscall.Access(tunDevice, accessReadWrite); err != nil {
			return nil, fmt.Errorf("%w: %s is not readable and writable by the server's user (%v); Debian's mode is 0666 (.ci/install-deps restores it), or pass --agent-unconfined", ErrUnavailable, tunDevice, err)
		}
	}
	h.hide, h.files, h.explicit = hiddenPaths(cfg.Hide)
	h.expose = exposedPaths(h.hide, h.explicit, append(slices.Clone(cfg.Programs), cfg.Commands...))
	if err := h.checkCommands(cfg.Commands); err != nil {
		return nil, err
	}
	// A path in an argv may be meant for the server alone; a script an
	// interpreter runs would be reported missing by it.
	for _, p := range cfg.Programs {
		if path, err := execPath(p); err == nil && !slices.Contains(cfg.Commands, p) {
			if why := h.hiddenBy(path, nil); why != "" {
				h.log.Warn("sandbox: a path in a harness argv is hidden from agents", "path", p, "why", why)
			}
		}
	}
	if h.root {
		r := cfg.UIDs
		if r == (UIDRange{}) {
			r = DefaultUIDs
		}
		dir := cfg.LeaseDir
		if dir == "" {
			dir = DefaultLeaseDir
		}
		l, err := newLeases(r, dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		h.leases = l
		for _, c := range cfg.Commands {
			if path, err := execPath(c); err == nil {
				if why := h.othersCannotRun(path); why != "" {
					h.log.Warn("sandbox: an agent's UID may not run a harness program", "program", c, "why", why)
				}
			}
		}
	}
	if cfg.MaxProcs > 0 || cfg.MaxMemory > 0 {
		cg, err := newCgroups(cfg.MaxProcs, cfg.MaxMemory)
		if err != nil {
			return nil, fmt.Errorf("%w: --agent-max-procs/--agent-max-memory: %v", ErrUnavailable, err)
		}
		h.cg = cg
	}
	if err := h.probe(); err != nil {
		return nil, fmt.Errorf("%w: %v (namespaces unavailable? pass --agent-unconfined to run agents without a sandbox)", ErrUnavailable, err)
	}
	return h, nil
}

// probe runs `true` in a sandbox with every namespace.
func (h *Host) probe() error {
	args := append(h.namespaceArgs(true), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true")
	return retryVanishedMount(func() ([]byte, error) {
		cmd := exec.Command(h.bwrap, args...)
		cmd.Env = []string{}
		return cmd.CombinedOutput()
	})
}

// probeAttempts bounds the probe's runs when a host mount vanished under
// bwrap.
const probeAttempts = 3

// retryVanishedMount runs bwrap (run) and says how it failed. bwrap binds
// the host's mounts one by one from a list it read first, so a mount that
// another process removed meanwhile (a test's or a container's) fails it
// with "No such file or directory" on that mount: the host is fine, and
// bwrap runs again, at most probeAttempts times in all.
func retryVanishedMount(run func() ([]byte, error)) error {
	for attempt := 1; ; attempt++ {
		out, err := run()
		if err == nil {
			return nil
		}
		msg := strings.TrimSpace(string(out))
		if attempt == probeAttempts || !vanishedMount(msg) {
			return fmt.Errorf("bwrap: %v: %s", err, msg)
		}
	}
}

// vanishedMount reports whether bwrap's message is that of a host mount
// gone while bwrap bound the host's mounts.
func vanishedMount(msg string) bool {
	return strings.Contains(msg, "Can't bind mount /oldroot/") && strings.Contains(msg, "No such file or directory")
}

// namespaceArgs are bwrap's namespace and lifetime options; without
// ownNet the sandbox stays in the network namespace it was started in.
func (h *Host) namespaceArgs(ownNet bool) []string {
	args := []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if ownNet {
		args = append(args, "--unshare-net")
	}
	if !h.root {
		// Nested user namespaces stay allowed: a CLI may sandbox itself
		// with them, and the kernel locks the mounts that hide the host.
		args = append(args, "--unshare-user")
	}
	return args
}

// pdeathsig makes the kernel kill cmd's process when the server dies.
func pdeathsig(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
