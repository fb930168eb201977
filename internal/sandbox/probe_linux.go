package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

func probe() Report {
	r := landlockReport()
	nsFlags := syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	if err := tryNamespaces(uintptr(nsFlags)); err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("cannot create user, PID and mount namespaces: %v", err))
	} else {
		r.UserNS, r.PIDNS = true, true
		if err := tryNamespaces(uintptr(nsFlags | syscall.CLONE_NEWNET)); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("cannot create a network namespace: %v", err))
		} else {
			r.NetNS = true
		}
	}
	return r
}

// landlockReport fills in the Landlock half of a Report.
func landlockReport() Report {
	var r Report
	abi, err := landlockABI()
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("Landlock is not available (%v): it must be built in and enabled at boot (lsm=...,landlock)", err))
	} else {
		r.LandlockABI = abi
	}
	r.FS = abi >= 3
	r.Net = abi >= 4
	r.Scopes = abi >= 6
	r.SocketFilter = proxyFilterSupported()
	if abi > 0 && abi < 6 {
		r.Problems = append(r.Problems, fmt.Sprintf("Landlock ABI %d is older than 6 (kernel 6.12): %s", abi, strings.Join(missingFrom(abi), ", ")))
	}
	return r
}

func missingFrom(abi int) []string {
	var m []string
	if abi < 3 {
		m = append(m, "no truncate rule (ABI 3)")
	}
	if abi < 4 {
		m = append(m, "no TCP rules (ABI 4)")
	}
	if abi < 5 {
		m = append(m, "no device ioctl rule (ABI 5)")
	}
	m = append(m, "no signal and abstract socket scopes (ABI 6)")
	return m
}

// tryNamespaces starts a process in new namespaces, mapped as Command
// maps the launcher, and has it exec a path that does not exist: ENOENT
// from the exec proves the clone and the uid and gid maps worked, and
// nothing ran.
func tryNamespaces(flags uintptr) error {
	_, err := syscall.ForkExec("/nonexistent/acpflow-sandbox-probe", []string{"probe"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{
			Cloneflags:  flags,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}},
		},
	})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err == nil {
		return errors.New("the probe's exec unexpectedly succeeded")
	}
	return err
}
