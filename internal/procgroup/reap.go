package procgroup

import (
	"os"
	"strings"
	"syscall"
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

// Marker is the value of MarkerVar in the child's environment.
func (c *Child) Marker() string { return c.marker }

// Alive reports whether process pid exists, is not a zombie, and is still
// the process that started at ticks.
func Alive(pid int, ticks uint64) bool {
	return alive(procKey{pid, ticks})
}

// Leftovers is what a dead acpflow recorded of the processes it started
// for a run: each agent (its pid is its group id) and each process seen
// below one, by pid and start time, and the acpflow process itself, whose
// children's markers start with OwnerMarker(Owner, OwnerStartTicks).
type Leftovers struct {
	Owner           int
	OwnerStartTicks uint64
	Procs           []Proc
}

// Reap kills what is left of the recorded processes and waits (bounded)
// for them to go. It returns the processes it killed.
//
// No group is ever signalled as a whole, and no pid unless the process is
// proved to be one acpflow started: it is a recorded process with the same
// start time, or it carries the marker of a child of the recorded acpflow
// process (MarkerVar). A recorded agent's pid may since have been reused,
// even as a process group id by an unrelated daemon (a group id stays in
// use while the group has members, not while its leader lives); every
// member of such a group is checked like any other process.
func (l Leftovers) Reap() []Proc {
	recorded := make(map[procKey]bool, len(l.Procs))
	for _, p := range l.Procs {
		recorded[procKey{p.PID, p.StartTicks}] = true
	}
	owner := ""
	if l.Owner > 0 && l.OwnerStartTicks > 0 {
		owner = OwnerMarker(l.Owner, l.OwnerStartTicks)
	}
	me := os.Getpid()
	var kill []procKey
	var killed []Proc
	for _, p := range snapshot() {
		if p.dead() || p.pid == me {
			continue
		}
		if !recorded[p.key()] && (owner == "" || !strings.HasPrefix(markerOf(p.pid), owner)) {
			continue
		}
		kill = append(kill, p.key())
		killed = append(killed, Proc{PID: p.pid, PGID: p.pgid, StartTicks: p.start})
	}
	for _, k := range kill {
		// The start time is checked again just before the signal: the
		// window in which the pid could change hands is this one call.
		if alive(k) {
			syscall.Kill(k.pid, syscall.SIGKILL)
		}
	}
	waitKeysGone(kill)
	return killed
}
