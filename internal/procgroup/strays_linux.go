package procgroup

import (
	"os"
	"strconv"
	"strings"
)

// threadsSettled reports whether every thread of process pid, a zombie
// main thread whose other threads run on, is stopped, dead, or in
// uninterruptible sleep.
func threadsSettled(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return true // gone
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		if s, ok := parseStat(pid, b); ok && !strings.ContainsRune("TtDZX", rune(s.state)) {
			return false
		}
	}
	return true
}

// threadRunning reports whether any thread of process pid is running or
// waiting for a CPU: /proc/PID/stat says only the main thread's state, and
// a busy process on a loaded machine may use no CPU between two looks.
func threadRunning(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false // gone
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		if s, ok := parseStat(pid, b); ok && (s.state == 'R' || s.state == 'D') {
			return true
		}
	}
	return false
}
