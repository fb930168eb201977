package procgroup

import (
	"errors"
	"fmt"
	"syscall"
)

// IDMap is one line of a user namespace's uid or gid map. macOS has no
// user namespaces: a Spec that sets one is refused (sysProcAttr).
type IDMap struct {
	ContainerID int
	HostID      int
	Size        int
}

// sysProcAttr starts the child in a process group of its own (its pid is
// the group's id, which teardown signals).
//
// # Notes
//
// macOS has no Pdeathsig: a child outlives an acpflow that is killed
// (SIGKILL, a crash); the run store's record of it is what a later
// acpflow reaps (Leftovers.Reap). Nor has it namespaces, which only the
// sandbox asks for, and internal/sandbox refuses on macOS before a spawn.
func sysProcAttr(spec Spec) (*syscall.SysProcAttr, error) {
	if spec.Cloneflags != 0 || len(spec.UidMappings) > 0 || len(spec.GidMappings) > 0 || len(spec.AmbientCaps) > 0 {
		return nil, errors.New("procgroup: namespaces and ambient capabilities need Linux; this is darwin")
	}
	return &syscall.SysProcAttr{Setpgid: true}, nil
}

// EnableSubreaper fails on macOS, which has no child subreaper: an orphan
// of a child is re-parented to launchd, out of acpflow's sight.
//
// # Notes
//
// Teardown is then the group's ladder (SIGTERM, SIGKILL to the group)
// plus every descendant seen below the child while it lived, which the
// process table is read for as on Linux. A process that left the group
// (setsid) and whose parent died before a read saw it is not followed.
func EnableSubreaper() error {
	return fmt.Errorf("procgroup: no child subreaper on darwin: %w", errors.ErrUnsupported)
}

// threadsSettled is never called on macOS: its process table counts no
// threads (procInfo.threads is 1), so a zombie is dead.
func threadsSettled(pid int) bool { return true }

// fionread is the ioctl that counts the bytes waiting in a pipe: FIONREAD,
// _IOR('f', 127, int) in <sys/filio.h>, which x/sys/unix does not name
// for macOS.
const fionread = 0x4004667f

// threadRunning is always true on macOS, which cannot tell an idle
// process from a busy one (cpuOf): no early end of an EOF wait there.
func threadRunning(pid int) bool { return true }
