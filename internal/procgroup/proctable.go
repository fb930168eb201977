package procgroup

import (
	"bytes"
	"os"
	"strconv"
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, b)
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
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
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
