package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
)

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
	// f[0]=state f[1]=ppid f[2]=pgrp f[3]=session ... f[17]=num_threads f[19]=starttime
	if len(f) < 20 {
		return procInfo{}, false
	}
	atoi := func(s []byte) int { n, _ := strconv.Atoi(string(s)); return n }
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	return procInfo{pid: pid, state: f[0][0], ppid: atoi(f[1]), pgid: atoi(f[2]), sid: atoi(f[3]), start: start, threads: atoi(f[17])}, true
}

// snapshot reads the whole process table afresh: about 5 µs a process.
func snapshot() []procInfo {
	names := pids()
	out := make([]procInfo, 0, len(names))
	var buf [512]byte
	for _, n := range names {
		if p, ok := readProcInto(n, buf[:]); ok {
			out = append(out, p)
		}
	}
	return out
}

// pids lists the processes in /proc.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procTable reads the process table incrementally: a process already read
// is not read again while its pid and its parent's stay listed, so a read
// costs one directory listing plus the processes born since the last one.
// That is what tracking descendants needs: the start time is fixed for a
// process's life, and its parent changes only when the parent dies (it is
// re-parented to acpflow, the subreaper, or init), which is why a process
// whose remembered parent is no longer listed is read again: else an
// orphan would stay below a parent that is gone, found neither as a
// descendant nor as an orphan. What else changes later (state, group) is
// read afresh where it matters.
type procTable struct {
	mu    sync.Mutex
	known map[int]procInfo
}

func (t *procTable) read() []procInfo {
	names := pids()
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[int]procInfo, len(names))
	out := make([]procInfo, 0, len(names))
	var buf [512]byte
	for _, pid := range names {
		p, ok := t.known[pid]
		if !ok {
			if p, ok = readProcInto(pid, buf[:]); !ok {
				continue
			}
		}
		next[pid] = p
		out = append(out, p)
	}
	for i, p := range out {
		if _, listed := next[p.ppid]; listed || p.ppid <= 1 {
			continue
		}
		if q, ok := readProcInto(p.pid, buf[:]); ok {
			out[i], next[p.pid] = q, q
		}
	}
	t.known = next
	return out
}

// cpuOf reads /proc/PID/stat of each pid (gone ones count nothing).
func cpuOf(pids []int) cpuUse {
	var u cpuUse
	var buf [512]byte
	for _, pid := range pids {
		fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		n, err := syscall.Read(fd, buf[:])
		syscall.Close(fd)
		if err != nil || n <= 0 {
			continue
		}
		b := buf[:n]
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := bytes.Fields(b[i+2:])
		// f[0]=state … f[11]=utime f[12]=stime
		if len(f) < 13 {
			continue
		}
		if f[0][0] == 'R' || f[0][0] == 'D' {
			u.running = true
		}
		ut, _ := strconv.ParseUint(string(f[11]), 10, 64)
		st, _ := strconv.ParseUint(string(f[12]), 10, 64)
		u.ticks += ut + st
	}
	return u
}
