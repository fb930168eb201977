package procgroup

import "golang.org/x/sys/unix"

// markerOf reads the marker in the initial environment of process pid
// (sysctl kern.procargs2): "" when it has none or cannot be read (gone,
// or another user's).
func markerOf(pid int) string {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return ""
	}
	return markerIn(procArgsEnviron(b))
}
