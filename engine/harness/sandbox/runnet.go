package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// A root server gives each run network namespaces of its own, each made
// once with its pasta and entered by the run's executions, one
// execution at a time: configuring pasta is most of what a sandbox costs
// to start, and paying it per run instead of per execution changes
// nothing of what an agent can reach (the same allowed ports, no host
// loopback). Two executions of a run that overlap (parallel verifiers)
// never share a namespace; one that follows another finds it without a
// process of the earlier one left (each sandbox's PID namespace dies with
// its init). A server that is not root cannot enter a namespace its
// sandbox's user namespace owns, and connects one per execution.

// runNetwork is one network namespace of a run's and its pasta.
type runNetwork struct {
	ns  *os.File // holds the namespace open
	net *network
}

func (n *runNetwork) close() {
	n.net.stop()
	n.ns.Close()
}

// Prepare leases, in the background, run's writer UID and gives it its
// first network namespace (one made ahead, or a new one), so that its
// first execution finds both ready; call it when the run's workspace is
// being made. CloseRun ends them. From the first Prepare (or
// MakeNetworksAhead) on, the host keeps Config.NetworksAhead namespaces
// made ahead.
func (h *Host) Prepare(run string) {
	if h == nil || h.cfg.Unconfined || !h.root {
		return
	}
	h.mu.Lock()
	if _, open := h.nets[run]; open {
		h.mu.Unlock()
		return
	}
	h.nets[run] = nil
	ready := make(chan struct{})
	h.making[run] = ready
	leased := h.leaseAhead(run)
	h.mu.Unlock()
	go func() {
		defer func() {
			<-leased
			h.mu.Lock()
			delete(h.making, run)
			h.mu.Unlock()
			close(ready)
		}()
		n := h.takeSpareNetwork()
		if n != nil && n.net.exited() {
			h.log.Warn("sandbox: the network made ahead lost its pasta; making another")
			n.close()
			n = nil
		}
		if n == nil {
			var err error
			if n, err = h.newNetwork(nil); err != nil {
				h.log.Warn("sandbox: preparing a run's network", "err", err)
				return
			}
		}
		h.giveBack(run, n)
	}()
}

// takeSpareNetwork returns the oldest namespace made ahead, or, when none
// is ready, the one being made (its pasta raised to normal priority and
// waited for, rather than a second made meanwhile), or nil when there is
// none; the host then makes another ahead in its place.
func (h *Host) takeSpareNetwork() *runNetwork {
	h.mu.Lock()
	if len(h.spares) == 0 && h.spareMade != nil {
		made, sched := h.spareMade, h.spareSched
		h.mu.Unlock()
		sched.hurry()
		<-made
		h.mu.Lock()
	}
	var n *runNetwork
	if len(h.spares) > 0 {
		n = h.spares[0]
		h.spares = slices.Delete(h.spares, 0, 1)
	}
	h.mu.Unlock()
	h.makeSpareNetworks()
	return n
}

// MakeNetworksAhead starts making Config.NetworksAhead namespaces ahead
// now rather than at the first run's Prepare: a server calls it at its
// start, so that its first runs find theirs made. A nil host makes none.
func (h *Host) MakeNetworksAhead() {
	if h != nil {
		h.makeSpareNetworks()
	}
}

// networksAhead is how many namespaces the host keeps made ahead.
func (h *Host) networksAhead() int {
	switch n := h.cfg.NetworksAhead; {
	case n == 0:
		return DefaultNetworksAhead
	case n < 0:
		return 0
	default:
		return n
	}
}

// makeSpareNetworks makes namespaces for the next runs' Prepare, one at
// a time on a goroutine of its own, until Config.NetworksAhead are made
// ahead, unless one is being made or the host is closed. Each one's pasta
// starts at idle priority (SCHED_IDLE), so that making it takes only
// what the host's runs leave of its CPUs, and runs at normal priority
// once it is made or a run waits for it. No execution has entered a
// spare: it is what Prepare would make, made earlier.
func (h *Host) makeSpareNetworks() {
	if h.cfg.Unconfined || !h.root {
		return
	}
	h.mu.Lock()
	if len(h.spares) >= h.networksAhead() || h.spareMade != nil || h.closed {
		h.mu.Unlock()
		return
	}
	made, sched := make(chan struct{}), &aheadSched{}
	h.spareMade, h.spareSched = made, sched
	h.spareWG.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.spareWG.Done()
		n, err := h.newNetwork(sched)
		h.mu.Lock()
		h.spareMade, h.spareSched = nil, nil
		keep := err == nil && !h.closed && len(h.spares) < h.networksAhead()
		if keep {
			h.spares = append(h.spares, n)
		}
		h.mu.Unlock()
		close(made)
		switch {
		case err != nil:
			// The next Prepare or CloseRun tries again.
			h.log.Warn("sandbox: making a network ahead", "err", err)
		case !keep:
			n.close()
		default:
			h.makeSpareNetworks()
		}
	}()
}

// Close ends the namespaces made ahead for the next runs, once one being
// made is done; runs' own namespaces end with CloseRun. The host makes
// none ahead after it. A nil host has nothing to close.
func (h *Host) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.closed = true
	sched := h.spareSched
	h.mu.Unlock()
	sched.hurry()
	h.spareWG.Wait()
	h.mu.Lock()
	spares := h.spares
	h.spares = nil
	h.mu.Unlock()
	for _, n := range spares {
		n.close()
	}
}

// leaseAhead starts leasing run's writer UID on a goroutine of its own
// and returns the channel closed when that is done; Writer waits for it.
// h.mu is held.
func (h *Host) leaseAhead(run string) <-chan struct{} {
	leased := make(chan struct{})
	h.leasing[run] = leased
	go func() {
		defer func() {
			h.mu.Lock()
			if h.leasing[run] == leased { // not a later Prepare's
				delete(h.leasing, run)
			}
			h.mu.Unlock()
			close(leased)
		}()
		h.leaseWriter(run)
	}()
	return leased
}

// awaitPrepared waits for what Prepare makes for run, when it is being
// made.
func (h *Host) awaitPrepared(run string) {
	h.mu.Lock()
	ready, making := h.making[run]
	h.mu.Unlock()
	if making {
		<-ready
	}
}

// Writer returns the UID run's executions will write as, once the lease
// Prepare takes ahead of the run's first execution is there (it waits for
// it), and false when the run has none: this host runs agents as itself
// (not root, or unconfined), Prepare took no lease (it does so only where
// runs get network namespaces of their own) or was not called, the run
// has ended, or the lease failed (the first execution then leases, or
// says why not). No process runs as that UID before the run's first
// execution, so the host may give the run's workspace to it beforehand.
func (h *Host) Writer(run string) (int, bool) {
	if h == nil {
		return 0, false
	}
	h.mu.Lock()
	leasing, ok := h.leasing[run]
	h.mu.Unlock()
	if ok {
		<-leasing
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.writers[run]
	if !ok {
		return 0, false
	}
	return int(l.uid), true
}

// leaseWriter leases run's writer UID ahead of its first execution,
// unless the run has one or has ended meanwhile.
func (h *Host) leaseWriter(run string) {
	h.mu.Lock()
	_, leased := h.writers[run]
	h.mu.Unlock()
	if leased {
		return
	}
	l, err := h.leases.acquire()
	if err != nil {
		h.log.Warn("sandbox: leasing a run's writer UID ahead", "err", err)
		return
	}
	h.mu.Lock()
	_, open := h.nets[run]
	_, leased = h.writers[run]
	if open && !leased {
		h.writers[run], l = l, nil
	}
	h.mu.Unlock()
	if l != nil {
		if err := l.release(); err != nil {
			h.log.Error("sandbox: giving back a spare writer UID", "uid", l.uid, "err", err)
		}
	}
}

// takeNetwork gives an execution of run a namespace no running execution
// of the run uses, making one when none is free.
func (h *Host) takeNetwork(run string) (*runNetwork, error) {
	h.mu.Lock()
	if ready, ok := h.making[run]; ok {
		// The run's first namespace is being made: wait for it rather
		// than make another.
		h.mu.Unlock()
		<-ready
		h.mu.Lock()
	}
	free, open := h.nets[run]
	if len(free) > 0 {
		n := free[len(free)-1]
		h.nets[run] = free[:len(free)-1]
		h.mu.Unlock()
		return n, nil
	}
	if !open {
		h.nets[run] = nil
	}
	h.mu.Unlock()
	return h.newNetwork(nil)
}

// newNetwork makes a network namespace and connects it; sched, when not
// nil, schedules its pasta as one made ahead.
func (h *Host) newNetwork(sched *aheadSched) (*runNetwork, error) {
	ns, err := newNetNamespace()
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	net, err := h.connect(ns, sched)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("connecting the network: %w", err)
	}
	return &runNetwork{ns: ns, net: net}, nil
}

// giveBack returns n to run's free namespaces, or ends it when the run
// has ended meanwhile.
func (h *Host) giveBack(run string, n *runNetwork) {
	if n == nil {
		return
	}
	h.mu.Lock()
	_, open := h.nets[run]
	if open {
		h.nets[run] = append(h.nets[run], n)
	}
	h.mu.Unlock()
	if !open {
		n.close()
	}
}

// closeNetworks ends run's free namespaces.
func (h *Host) closeNetworks(run string) {
	h.mu.Lock()
	free := h.nets[run]
	delete(h.nets, run)
	h.mu.Unlock()
	for _, n := range free {
		n.close()
	}
}

// newNetNamespace makes a network namespace and returns a descriptor
// that keeps it, from a thread of this process's own that moves into the
// new namespace and back (onNetworkThread). No process is started: a fork
// holds the runtime's fork lock, which every other process start of the
// server (its git commands) waits for, for as long as the kernel takes to
// make the namespace.
func newNetNamespace() (f *os.File, err error) {
	<-onNetworkThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		return nil
	}, func(entered error) {
		if err = entered; err == nil {
			f, err = os.Open("/proc/thread-self/ns/net")
		}
	})
	return f, err
}

// onNetworkThread runs do on a goroutine locked to an OS thread of this
// process that enter (unshare or setns) has moved into another network
// namespace, then moves the thread back into the namespace it came from,
// where it serves other goroutines again; the returned channel is closed
// once the thread has left that other namespace (or, where it cannot,
// as its goroutine ends, the thread with it). do gets enter's error
// (or the failure to note where the thread came from), and then runs
// where the thread was. The thread must not end: a child started from it
// with a parent-death signal (the server's git commands, pasta, an
// agent's sandbox) would be killed with it. Only when it cannot move back
// does it end, as its goroutine returns still locked to it (the main
// thread sleeps for good instead); it never runs another goroutine in the
// other namespace.
func onNetworkThread(enter func() error, do func(entered error)) <-chan struct{} {
	left := make(chan struct{})
	go func() {
		defer close(left)
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err == nil {
			defer back.Close()
			err = enter()
		}
		if err != nil { // the thread is where it was
			runtime.UnlockOSThread()
			do(err)
			return
		}
		do(nil)
		if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return left
}
