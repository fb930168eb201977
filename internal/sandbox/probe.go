package sandbox

import (
	"fmt"
	"strings"
	"sync"
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
	// needs them) and a network namespace (network "off" and "gateway").
	UserNS bool `json:"user_ns"`
	PIDNS  bool `json:"pid_ns"`
	NetNS  bool `json:"net_ns"`
	// SocketFilter: a seccomp filter for this architecture that keeps a
	// network "proxy" agent to plain TCP, which Landlock's rules cover,
	// and a network "off" or "proxy" agent from unix sockets
	// (seccomp_linux.go).
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
	switch n := s.network(); n {
	case NetworkOff, NetworkGateway:
		if !r.NetNS {
			miss = append(miss, fmt.Sprintf("network %s (no network namespace)", n))
		}
		if !r.SocketFilter {
			miss = append(miss, fmt.Sprintf("network %s (no socket filter for this architecture: unix sockets outside the sandbox would pass)", n))
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
	if !s.ownNetns() && r.LandlockABI > 0 && !r.Scopes {
		miss = append(miss, fmt.Sprintf("abstract unix socket scoping (Landlock ABI %d; 6 needed)", r.LandlockABI))
	}
	if len(miss) == 0 {
		return nil
	}
	return fmt.Errorf("sandbox: %s %w", strings.Join(miss, "; "), errNotEnforceable)
}
