package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Report is what this machine can enforce, for `acpflow probe --sandbox`
// and for Command's check before a spawn.
type Report struct {
	// LandlockABI is the kernel's Landlock ABI version; 0 when Landlock is
	// missing or disabled at boot.
	LandlockABI int `json:"landlock_abi"`
	// FS: file access rules including truncate (ABI 3). Without
	// truncate, a file the agent may only read could still be emptied.
	FS bool `json:"fs"`
	// Net: TCP bind and connect rules (ABI 4), which network "proxy" needs.
	Net bool `json:"net"`
	// Scopes: signals and abstract unix sockets confined to the sandbox
	// (ABI 6).
	Scopes bool `json:"scopes"`
	// UserNS, PIDNS, NetNS: an unprivileged process may create a user
	// namespace and, inside it, PID and mount namespaces (every sandbox
	// needs them) and a network namespace (network "off").
	UserNS bool `json:"user_ns"`
	PIDNS  bool `json:"pid_ns"`
	NetNS  bool `json:"net_ns"`
	// SocketFilter: a seccomp filter for this architecture that keeps a
	// network "proxy" agent to plain TCP, which Landlock's rules cover
	// (seccomp.go).
	SocketFilter bool `json:"socket_filter"`
	// Problems say, one sentence each, why something above is false.
	Problems []string `json:"problems,omitempty"`
}

// probed memoises Probe: what a kernel supports does not change while
// acpflow runs, and probing namespaces costs two forks.
var probed = sync.OnceValue(probe)

// Probe says what this machine can enforce. The namespace checks start a
// process in new namespaces (it fails at exec, on purpose) once per
// acpflow process; the answer is remembered.
//
// # Notes
//
// Mounting a fresh /proc is not probed: where /proc is partly hidden (some
// containers mask paths in it), the kernel refuses that mount in a user
// namespace, and the launcher then exits with LaunchFailed saying so.
func Probe() Report { return probed() }

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
	abi, err := ll.LandlockGetABIVersion()
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

// enforces says which part of spec this machine cannot enforce, if any.
func (r Report) enforces(s Spec) error {
	var miss []string
	switch {
	case r.LandlockABI == 0:
		miss = append(miss, "file access rules (Landlock is not available)")
	case !r.FS:
		miss = append(miss, fmt.Sprintf("file access rules (Landlock ABI %d has no truncate rule; 3 needed)", r.LandlockABI))
	}
	if !r.UserNS || !r.PIDNS {
		miss = append(miss, "process isolation (no unprivileged user and PID namespaces: the agent could read other processes' environments)")
	}
	switch s.network() {
	case NetworkOff:
		if !r.NetNS {
			miss = append(miss, "network off (no network namespace)")
		}
	case NetworkProxy:
		if !r.Net {
			miss = append(miss, fmt.Sprintf("network proxy (Landlock ABI %d has no TCP rules; 4 needed)", r.LandlockABI))
		}
		if !r.SocketFilter {
			miss = append(miss, "network proxy (no socket filter for this architecture: MPTCP and UDP would pass)")
		}
	}
	// Outside a network namespace of its own, the agent shares acpflow's
	// abstract unix sockets (D-Bus, X11); only the scope confines them.
	// Signals are confined by the PID namespace either way.
	if s.network() != NetworkOff && r.LandlockABI > 0 && !r.Scopes {
		miss = append(miss, fmt.Sprintf("abstract unix socket scoping (Landlock ABI %d; 6 needed)", r.LandlockABI))
	}
	if len(miss) == 0 {
		return nil
	}
	return fmt.Errorf("sandbox: %s %w", strings.Join(miss, "; "), errNotEnforceable)
}
