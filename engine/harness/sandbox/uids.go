package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// statusHead is how much of a process's status file a scan reads. The
// kernel renders the whole file at the first read, and its State and Uid
// lines come in its first dozen lines (after Name, whose value is at most
// 64 bytes escaped), far within it; the rest (groups, memory, signal
// masks) is left unread. A second read, which a reader to end of file
// makes, costs about as much as the first.
const statusHead = 4096

// eachProcess calls fn with the UIDs of every process that is not a
// zombie. Each process costs one open, one read and one close, relative
// to an open /proc: a scan runs at every UID lease and release, and on a
// host of a few hundred processes it is the larger part of either.
func eachProcess(fn func(pid int, uids []uint32)) error {
	if procScanHook != nil {
		procScanHook()
	}
	proc, err := os.Open("/proc")
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	defer proc.Close()
	names, err := proc.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("listing processes: %w", err)
	}
	dir := int(proc.Fd())
	buf := make([]byte, statusHead)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		n, err := readHead(dir, name+"/status", buf)
		if err != nil {
			continue // gone meanwhile
		}
		uids, zombie, err := parseStatus(buf[:n])
		if err != nil || zombie {
			continue
		}
		fn(pid, uids)
	}
	return nil
}

// readHead reads the start of the file name under the directory dir into
// buf with one read, and returns how much it read.
func readHead(dir int, name string, buf []byte) (int, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

// parseStatus reads a process's UIDs (real, effective, saved, filesystem)
// and whether it is a zombie from the start of its status file.
func parseStatus(b []byte) (uids []uint32, zombie bool, err error) {
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		if v, ok := bytes.CutPrefix(line, []byte("State:")); ok {
			zombie = bytes.HasPrefix(bytes.TrimSpace(v), []byte("Z"))
		}
		if v, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			for _, f := range bytes.Fields(v) {
				u, err := strconv.ParseUint(string(f), 10, 32)
				if err != nil {
					return nil, false, fmt.Errorf("status: Uid %q", v)
				}
				uids = append(uids, uint32(u))
			}
			if len(uids) == 0 {
				return nil, false, errors.New("status: an empty Uid line")
			}
			return uids, zombie, nil
		}
	}
	return nil, false, errors.New("status: no Uid line")
}
