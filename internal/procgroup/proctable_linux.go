package procgroup

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
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
	var path procPath
	n, ok := readOnce(path.of(pid, -1, "stat"), buf)
	if !ok || n <= 0 {
		return procInfo{}, false
	}
	return parseStat(pid, buf[:n])
}

// procPath builds "/proc/PID/LEAF" or "/proc/PID/task/TID/LEAF" in place,
// NUL-terminated for the kernel: syscall.Open would copy its string.
type procPath [64]byte

func (p *procPath) of(pid, tid int, leaf string) []byte {
	b := append(p[:0], "/proc/"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if tid >= 0 {
		b = append(b, "/task/"...)
		b = strconv.AppendInt(b, int64(tid), 10)
	}
	b = append(b, '/')
	b = append(b, leaf...)
	return append(b, 0)
}

// openPath opens a NUL-terminated path read-only, without allocating.
func openPath(path []byte) (int, bool) {
	cwd := -100 // AT_FDCWD
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&path[0])),
		syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	if errno != 0 {
		return -1, false
	}
	return int(fd), true
}

// readOnce reads a file with one read() into buf: /proc's files are made
// at the read, and one read of a big enough buffer is one consistent pass.
func readOnce(path, buf []byte) (int, bool) {
	fd, ok := openPath(path)
	if !ok {
		return 0, false
	}
	n, err := syscall.Read(fd, buf)
	syscall.Close(fd)
	if err != nil {
		return 0, false
	}
	return n, true
}

// statFields is how many fields of /proc/PID/stat, after the command name,
// are read: state (0), ppid, pgrp, session, … utime (11), stime (12), …
// num_threads (17), itrealvalue, starttime (19).
const statFields = 20

// splitStat splits a /proc/PID/stat line into its first statFields fields
// after the command name, in place (no bytes.Fields: the table is read
// often, and it allocated a slice a line). The command name is in
// parentheses and may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func splitStat(b []byte, f *[statFields][]byte) bool {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	b = b[i+1:]
	for k := range f {
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\n') {
			b = b[1:]
		}
		j := 0
		for j < len(b) && b[j] != ' ' && b[j] != '\n' {
			j++
		}
		if j == 0 {
			return false
		}
		f[k], b = b[:j], b[j:]
	}
	return true
}

// decimal parses an unsigned decimal field (0 if it is none).
func decimal(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// parseStat parses a /proc/PID/stat line.
func parseStat(pid int, b []byte) (procInfo, bool) {
	var f [statFields][]byte
	if !splitStat(b, &f) {
		return procInfo{}, false
	}
	return procInfo{pid: pid, state: f[0][0], ppid: int(decimal(f[1])), pgid: int(decimal(f[2])), sid: int(decimal(f[3])),
		start: decimal(f[19]), threads: int(decimal(f[17]))}, true
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

// procTable reads the process table for the watcher and a teardown's
// first look and idle checks (waitEOF), the reads repeated while a child
// lives. It reads the whole table incrementally, as the subreaper too: a
// process already read is not read again while its pid and its parent's
// stay listed, so a read costs one directory listing plus the processes
// born since the last one, less than a walk of acpflow's subtree, which
// reads a children file per thread (a node or Rust agent has dozens): on
// the 2-core VM a teardown's walks competed with the step's settling
// (turn_end to step_end: 2.6 ms with this read, 6.4 ms with walks, for
// claude-agent-acp). The sweep's rounds and the group check, which need a
// fresh read of every process, walk the subtree instead (fresh, freshFor).
//
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

// read reads the whole table incrementally.
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
	var path procPath
	for _, pid := range pids {
		n, ok := readOnce(path.of(pid, -1, "stat"), buf[:])
		var f [statFields][]byte
		if !ok || !splitStat(buf[:n], &f) {
			continue
		}
		if f[0][0] == 'R' || f[0][0] == 'D' {
			u.running = true
		}
		u.ticks += decimal(f[11]) + decimal(f[12])
	}
	return u
}
