package sandbox

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// launchOf is the rest of Command, once spec is valid: whether this
// kernel can enforce it, and how to start the launcher in new namespaces.
func launchOf(launcher string, launcherArgs []string, spec Spec) (Launch, error) {
	if err := Probe().enforces(spec); err != nil {
		return Launch{}, err
	}
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS)
	if spec.ownNetns() {
		flags |= syscall.CLONE_NEWNET
	}
	// The caller's uid and gid are mapped to themselves: files keep their
	// owners, and a normal user needs no privilege to create the
	// namespaces. Setgroups stays denied, as an unprivileged gid map needs.
	// A uid other than 0 loses its capabilities in the new namespaces at
	// the launcher's exec unless they are ambient: it needs CAP_SYS_ADMIN
	// to mount, CAP_NET_ADMIN to bring up loopback and CAP_SETPCAP to lock
	// the agent out of capabilities, and drops them all before the agent
	// starts.
	return Launch{
		AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP},
		Path:        launcher,
		Args:        launcherArgs,
		Cloneflags:  flags,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
	}, nil
}

// socketpair is a connected pair of unix stream sockets, close-on-exec.
func socketpair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "gateway channel"), os.NewFile(uintptr(fds[1]), "gateway channel"), nil
}
