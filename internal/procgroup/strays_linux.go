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
