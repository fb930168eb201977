package procgroup

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// StartTicks is the start time of process pid, in clock ticks since boot:
// with the pid it names one process for its whole life. ok is false when
// the process does not exist.
func StartTicks(pid int) (ticks uint64, ok bool) {
	p, ok := readProc(pid)
	return p.start, ok
}

// StartTicks is the child's start time (see the function StartTicks).
func (c *Child) StartTicks() uint64 { return c.start }

// Alive reports whether process pid exists, is not a zombie, and is still
// the process that started at ticks.
func Alive(pid int, ticks uint64) bool {
	return alive(procKey{pid, ticks})
}

// ReapGroup kills what is left of a process group that a dead acpflow
// started (the run store recorded its leader's pid and start time), and
// waits for it to go. It reports whether anything was killed.
//
// A group id cannot be reused while the group has members, so: if the
// leader still lives as the same process, or no longer exists, whatever is
// in the group is ours; if its pid now names another process, that process
// could only get the pid once our group was empty, and nothing is killed.
func ReapGroup(pgid int, leaderTicks uint64) bool {
	if p, ok := readProc(pgid); ok && p.start != leaderTicks {
		return false
	}
	if !groupHasLiveMembers(pgid) {
		return false
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for groupHasLiveMembers(pgid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// groupHasLiveMembers reports whether the group has a member that is not a
// zombie, reaping the zombies acpflow adopted.
func groupHasLiveMembers(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	self := os.Getpid()
	live := false
	for _, p := range snapshot() {
		if p.pgid != pgid {
			continue
		}
		if p.state != 'Z' {
			live = true
		} else if p.ppid == self && p.pid != pgid && !registry.isLeader(p.pid) {
			reap(p.pid)
		}
	}
	return live
}
