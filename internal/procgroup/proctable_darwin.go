package procgroup

import (
	"golang.org/x/sys/unix"
)

// macOS's process states (<sys/proc.h>), as kern.proc reports them.
const (
	darwinIdle  = 1 // being created by fork
	darwinRun   = 2
	darwinSleep = 3
	darwinStop  = 4
	darwinZomb  = 5
)

// infoOf translates one kern.proc entry into Linux's words. The start time
// is in microseconds since the epoch: like Linux's ticks since boot, it is
// fixed for a process's life, so with the pid it names one process.
func infoOf(k *unix.KinfoProc) procInfo {
	p := procInfo{
		pid:     int(k.Proc.P_pid),
		ppid:    int(k.Eproc.Ppid),
		pgid:    int(k.Eproc.Pgid),
		start:   uint64(k.Proc.P_starttime.Sec)*1e6 + uint64(k.Proc.P_starttime.Usec),
		threads: 1,
	}
	switch k.Proc.P_stat {
	case darwinIdle, darwinRun:
		p.state = 'R'
	case darwinStop:
		p.state = 'T'
	case darwinZomb:
		p.state = 'Z'
	default:
		p.state = 'S'
	}
	return p
}

// readProc reads one process with sysctl kern.proc.pid. ok is false when
// the process is gone.
func readProc(pid int) (procInfo, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return procInfo{}, false
	}
	return infoOf(k), true
}

// snapshot reads the whole process table with one sysctl (kern.proc.all).
func snapshot() []procInfo {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]procInfo, 0, len(ks))
	for i := range ks {
		out = append(out, infoOf(&ks[i]))
	}
	return out
}

// procTable reads the process table. On macOS one sysctl returns it all,
// so there is nothing to read incrementally as on Linux.
type procTable struct{}

func (*procTable) read() []procInfo { return snapshot() }

// fresh reads the process table afresh: the whole of it, since macOS has
// no subreaper (see subtree_linux.go for Linux's subtree read).
func fresh() []procInfo { return snapshot() }

// freshFor is fresh: a teardown reads the whole table too.
func freshFor(*Child) []procInfo { return snapshot() }

// subtreeReads is false: macOS has no subreaper and no children files.
func subtreeReads() bool { return false }

// cpuOf cannot tell an idle group from a busy one on macOS: kern.proc
// reports no CPU time, and a process waiting for input is "runnable"
// there. So every group counts as running, and a Ladder's EOFIdle never
// ends the EOF wait early: the child gets the whole EOFGrace.
func cpuOf(pids []int) cpuUse {
	return cpuUse{running: true}
}
