// Command threads starts OS threads until the kernel refuses one (the
// runtime then dies) or threadsWanted run, then waits to be killed: a
// storm the cgroup pids limit counts like one of processes, but cheap
// to raise (a fork of bash costs tens of milliseconds on a busy host).
package main

import (
	"runtime"
	"time"
)

// threadsWanted is past oecp serve's default --agent-max-procs (4096).
const threadsWanted = 5000

func main() {
	for range threadsWanted {
		go func() {
			// A locked goroutine that sleeps keeps its thread to itself.
			runtime.LockOSThread()
			time.Sleep(time.Hour)
		}()
	}
	time.Sleep(time.Hour)
}
