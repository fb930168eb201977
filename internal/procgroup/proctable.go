package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procInfo is what the process table says of one process. The start time
// (in clock ticks since boot) tells a process from a later one that reused
// its pid, so a remembered pid is only signalled while it is the same process.
type procInfo struct {
	pid, ppid, pgid, sid int
	state                byte
	start                uint64
}

// procKey names one process for its whole life.
type procKey struct {
	pid   int
	start uint64
}

func (p procInfo) key() procKey { return procKey{p.pid, p.start} }

// readProc reads /proc/PID/stat. ok is false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	var buf [512]byte
	return readProcInto(pid, buf[:])
}

// readProcInto reads /proc/PID/stat into buf with three system calls and
// no allocation: the process table is read often, and os.ReadFile's stat
// and growth cost more than the read itself.
func readProcInto(pid int, buf []byte) (procInfo, bool) {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procInfo{}, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return procInfo{}, false
	}
	return parseStat(pid, buf[:n])
}

// parseStat parses a /proc/PID/stat line. The command name is in parentheses
// and may itself contain spaces and parentheses, so fields are counted from
// the last ')'.
func parseStat(pid int, b []byte) (procInfo, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+2:])
	// f[0]=state f[1]=ppid f[2]=pgrp f[3]=session ... f[19]=starttime
	if len(f) < 20 {
		return procInfo{}, false
	}
	atoi := func(s []byte) int { n, _ := strconv.Atoi(string(s)); return n }
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return procInfo{pid: pid, state: f[0][0], ppid: atoi(f[1]), pgid: atoi(f[2]), sid: atoi(f[3]), start: start}, true
}

// snapshot reads the whole process table. It costs well under a millisecond
// on a machine with a few hundred processes.
func snapshot() []procInfo {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]procInfo, 0, len(names))
	var buf [512]byte
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readProcInto(pid, buf[:]); ok {
			out = append(out, p)
		}
	}
	return out
}

// descendants returns every process below root in the table (not root itself).
func descendants(table []procInfo, root int) []procInfo {
	children := make(map[int][]procInfo, len(table))
	for _, p := range table {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive reports whether the process k still exists and is not a zombie.
func alive(k procKey) bool {
	p, ok := readProc(k.pid)
	return ok && p.start == k.start && p.state != 'Z'
}
