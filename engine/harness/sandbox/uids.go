package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// UIDRange is an inclusive range of UIDs for agent processes; each leased
// UID is also the process's only GID.
type UIDRange struct{ From, To uint32 }

// DefaultUIDs is the range leased from when --agent-uid-range is not given:
// far above the UIDs of people, system users and the usual subordinate-UID
// ranges of rootless containers.
var DefaultUIDs = UIDRange{From: 2100000000, To: 2100999999}

// DefaultLeaseDir holds one lock file per UID leased on this host; a lease
// is an exclusive flock on its file, so servers sharing the host never
// hand out the same UID, and a dead server's leases end with it.
const DefaultLeaseDir = "/run/oecp-agent-uids"

// killRounds bounds the rounds of SIGKILL a released UID's processes get;
// each round kills every process the previous one found still there.
const killRounds = 1000

// ParseUIDRange parses FROM-TO (inclusive, FROM > 0, FROM <= TO).
func ParseUIDRange(s string) (UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	from, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	to, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil || from == 0 || from > to || to >= 1<<32-1 {
		return UIDRange{}, fmt.Errorf("agent UID range %q: want FROM-TO with 0 < FROM <= TO < 4294967295", s)
	}
	return UIDRange{From: uint32(from), To: uint32(to)}, nil
}

// leases hands out UIDs of a range, each at most once at a time on the
// whole host.
type leases struct {
	r   UIDRange
	dir string

	mu   sync.Mutex
	held map[uint32]bool
	next uint64
}

// lease is one leased UID; release ends it.
type lease struct {
	uid  uint32
	file *os.File
	l    *leases
	once sync.Once
}

func newLeases(r UIDRange, dir string) (*leases, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("UID lease directory: %w", err)
	}
	return &leases{r: r, dir: dir, held: map[uint32]bool{}}, nil
}

// acquire leases a UID no server on the host holds and no process owns.
func (l *leases) acquire() (*lease, error) {
	busy, err := processUIDs()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	size := uint64(l.r.To-l.r.From) + 1
	for i := uint64(0); i < size; i++ {
		uid := l.r.From + uint32((l.next+i)%size)
		if l.held[uid] || busy[uid] {
			continue
		}
		f, err := os.OpenFile(filepath.Join(l.dir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("UID lease: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		l.held[uid] = true
		l.next = (l.next + i + 1) % size
		return &lease{uid: uid, file: f, l: l}, nil
	}
	return nil, fmt.Errorf("no free agent UID in %d-%d", l.r.From, l.r.To)
}

// release kills every process of the UID, then ends the lease.
func (x *lease) release() error {
	var err error
	x.once.Do(func() {
		err = killUID(x.uid)
		x.l.mu.Lock()
		delete(x.l.held, x.uid)
		x.l.mu.Unlock()
		x.file.Close() // drops the flock
	})
	return err
}

// killUID SIGKILLs every live process owned by uid until none is left.
func killUID(uid uint32) error {
	pause := time.Millisecond
	for range killRounds {
		pids, err := processesOf(uid)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A killed process takes a moment to go; a process forking
		// meanwhile is caught by the next round.
		time.Sleep(pause)
		pause = min(2*pause, maxKillPause)
	}
	return fmt.Errorf("processes of UID %d survive SIGKILL", uid)
}

// maxKillPause bounds the pause between two rounds of killUID: with
// killRounds rounds, a UID whose processes never go is given up after
// about ten seconds.
const maxKillPause = 10 * time.Millisecond

// processUIDs is the set of UIDs (real, effective, saved or filesystem)
// that own a live process.
func processUIDs() (map[uint32]bool, error) {
	out := map[uint32]bool{}
	err := eachProcess(func(_ int, uids []uint32) {
		for _, u := range uids {
			out[u] = true
		}
	})
	return out, err
}

func processesOf(uid uint32) ([]int, error) {
	var pids []int
	err := eachProcess(func(pid int, uids []uint32) {
		for _, u := range uids {
			if u == uid {
				pids = append(pids, pid)
				return
			}
		}
	})
	return pids, err
}

// procScanHook, when set (by tests), is called as a /proc scan begins.
var procScanHook func()

// eachProcess calls fn with the UIDs of every process that is not a
// zombie.
func eachProcess(fn func(pid int, uids []uint32)) error {
	if procScanHook != nil {
		procScanHook()
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		uids, zombie, err := statusUIDs(pid)
		if err != nil || zombie {
			continue // gone meanwhile
		}
		fn(pid, uids)
	}
	return nil
}

func statusUIDs(pid int) ([]uint32, bool, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var uids []uint32
	zombie := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "State:"); ok {
			zombie = strings.HasPrefix(strings.TrimSpace(rest), "Z")
		}
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			for _, f := range strings.Fields(rest) {
				if u, err := strconv.ParseUint(f, 10, 32); err == nil {
					uids = append(uids, uint32(u))
				}
			}
		}
	}
	if uids == nil {
		return nil, false, errors.New("no Uid line")
	}
	return uids, zombie, sc.Err()
}
