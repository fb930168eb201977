package procgroup

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// IDMap is one line of a user namespace's uid or gid map (Spec's
// UidMappings and GidMappings).
type IDMap = syscall.SysProcIDMap

// sysProcAttr starts the child in a process group of its own (its pid is
// the group's id, which teardown signals), in the namespaces spec asks for.
func sysProcAttr(spec Spec) (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{
		Setpgid: true,
		// If acpflow itself is killed, the child goes with it.
		Pdeathsig:   syscall.SIGKILL,
		Cloneflags:  spec.Cloneflags,
		UidMappings: spec.UidMappings,
		GidMappings: spec.GidMappings,
		AmbientCaps: spec.AmbientCaps,
	}, nil
}

// fionread is the ioctl that counts the bytes waiting in a pipe
// (FIONREAD, which Linux names TIOCINQ).
const fionread = unix.TIOCINQ
