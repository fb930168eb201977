// Package sandbox confines a spawned agent with the kernel (SPEC §9
// "Sandbox"): what it may read and write (Landlock), where it may connect
// (Landlock TCP rules, or a network namespace of its own), and which
// processes it can see and signal (a PID namespace with its own /proc, and
// Landlock's scopes). The confinement is applied in a launcher process
// between acpflow and the agent, never in acpflow itself, so it holds for
// every tool the agent runs, asked or not.
//
// # How to run an agent in it
//
// The launcher is cmd/acpflow-sandbox, installed beside acpflow, or else
// acpflow's own executable through a hidden subcommand; the whole job of
// either is
//
//	os.Exit(sandbox.Main(args)) // args: what follows the subcommand
//
// and the step runner, instead of starting the agent with procgroup,
// starts it through what Command returns:
//
//	self, _ := os.Executable()
//	launcher, largs := sandbox.Launcher(self, []string{"sandbox-exec"})
//	l, err := sandbox.Command(launcher, largs, spec, path, args)
//	if err != nil { /* fail the step: the kernel cannot enforce spec */ }
//	child, err := l.Start(env, onDescendant) // a procgroup.Child
//
// The agent gets the launcher's stdin, stdout and stderr, env as its
// environment, and spec.Cwd as its working directory, so everything else
// about the step (pipes, env policy, the process marker, teardown) stays
// as it is. spec.TmpDir is the caller's to create (private, 0700) and
// remove, and TMPDIR in env should name it. Before it exits, acpflow
// calls DismissWaiting, which ends the launchers Start started ahead.
//
// For network NetworkGateway the agent is started with StartGateway
// instead, which also returns the listener on 127.0.0.1:GatewayPort the
// launcher made inside the agent's network namespace; the caller serves
// the step's gateway on it:
//
//	spec.Network, spec.GatewayPort = sandbox.NetworkGateway, g.Port()
//	child, ln, err := l.StartGateway(env, onDescendant)
//	g.Serve(ln) // closed with the gateway
//
// # Notes
//
// The launcher is PID 1 of the agent's PID namespace. When it exits, the
// kernel kills everything left in that namespace, setsid daemons included;
// procgroup's SIGKILL of the group reaches it, so nothing outlives a
// teardown. It exits with the agent's exit code, or 128+signal when the
// agent was killed by one (the PID namespace's init cannot die by a
// signal it sends itself), and with LaunchFailed (and a line on stderr
// saying why) when it could not set the sandbox up.
//
// A signal sent to the group (procgroup's SIGTERM) reaches the agent
// directly, as without a sandbox; the launcher also forwards the SIGTERM,
// SIGINT and SIGHUP it gets, for a sender that signals it alone, so the
// agent may see such a signal twice.
//
// All of this is Linux's (*_linux.go). Elsewhere (sandbox_other.go, built
// for macOS) nothing is enforced: Command refuses every spec with an error
// wrapping ErrNeedsLinux, and Main starts nothing and returns LaunchFailed.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// Network says what an agent may connect to.
type Network string

const (
	// NetworkOn leaves the network as it is (SPEC's default).
	NetworkOn Network = "on"
	// NetworkOff gives the agent a network namespace of its own with only
	// a loopback interface: nothing outside the sandbox is reachable.
	NetworkOff Network = "off"
	// NetworkProxy allows one way out: a TCP connect to ProxyPort (where
	// internal/egress listens on loopback). Binding TCP ports is refused.
	NetworkProxy Network = "proxy"
	// NetworkGateway is NetworkOff with one way out: 127.0.0.1:GatewayPort
	// in the agent's own network namespace, where the launcher listens
	// before the agent starts and hands the listening socket to acpflow
	// (Launch.StartGateway), which serves the step's model gateway on it.
	// Nothing else outside the sandbox is reachable.
	NetworkGateway Network = "gateway"
)

// Spec is what a sandboxed agent may do. It travels to the launcher as
// JSON on a pipe, and holds paths and numbers, never secrets.
// Relative paths are an error; "~/" is not expanded.
type Spec struct {
	// Cwd is the agent's working directory, writable.
	Cwd string `json:"cwd"`
	// TmpDir is a private temporary directory, writable. The caller
	// creates it before the spawn and removes it after teardown.
	TmpDir string `json:"tmp_dir"`
	// Write are further writable paths (files or directories); each must
	// exist.
	Write []string `json:"write,omitempty"`
	// StateDirs are the agent preset's own state (~/.claude), writable;
	// missing ones are skipped. A default-deny entry below one of them is
	// lifted: an agent may read its own credentials, never another's.
	StateDirs []string `json:"state_dirs,omitempty"`
	// Deny are unreadable (and unwritable) besides DefaultDeny. An entry
	// may end in a glob of its last element ("creds*").
	Deny []string `json:"deny,omitempty"`
	// Network is NetworkOn when empty.
	Network Network `json:"network,omitempty"`
	// ProxyPort is the one TCP port a NetworkProxy agent may connect to.
	ProxyPort int `json:"proxy_port,omitempty"`
	// GatewayPort is the port of 127.0.0.1 a NetworkGateway agent reaches
	// its gateway on: the host-side gateway's own port, so that one URL
	// works inside and out.
	GatewayPort int `json:"gateway_port,omitempty"`
	// Home is the agent's home directory (its HOME), against which
	// DefaultDeny's relative entries are resolved. Required.
	Home string `json:"home"`
	// UserHome is the home of the user acpflow runs as: DefaultDeny
	// applies to it too, so an agent given another HOME still cannot
	// read the user's keys. Empty or equal to Home: Home only.
	UserHome string `json:"user_home,omitempty"`
	// Protect are paths that stay read-only even beneath a writable path
	// (an agent's settings files, which can hold hooks or commands),
	// unless Write names one exactly. Missing ones cannot be created.
	Protect []string `json:"protect,omitempty"`
	// Version is specVersion; Command sets it.
	Version int `json:"version"`
}

// LauncherName is the dedicated launcher's file name. Installed beside
// acpflow's executable (cmd/acpflow-sandbox, a binary of this package
// alone), it is what Launcher picks: its start is most of what a
// sandboxed spawn costs, and it starts in a third of the time acpflow's
// own executable does, which links every package acpflow has.
const LauncherName = "acpflow-sandbox"

// specVersion is the launcher protocol: the Spec's shape and meaning. A
// launcher refuses a spec of another version, and any field it does not
// know, so a launcher installed from another release never quietly
// enforces less than acpflow asked for. Bump it with any change to Spec.
const specVersion = 4

// Launcher returns what starts the launcher for a process whose executable
// is self: LauncherName beside self when one is installed there (a regular,
// executable file), else self with selfArgs, its hidden subcommand that
// calls Main. Both enforce the same; the dedicated one is faster to start.
func Launcher(self string, selfArgs []string) (path string, args []string) {
	p := filepath.Join(filepath.Dir(self), LauncherName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p, nil
	}
	return self, selfArgs
}

// LaunchFailed is the launcher's exit code when it could not set up the
// sandbox; it then never started the agent. (125 is what env(1) and
// container runtimes use for "the wrapper failed", so it is rarely an
// agent's own code.)
const LaunchFailed = 125

// Launch is how to start the launcher (the procgroup.Spec fields of the
// same names) and what to hand it once started: Start does both.
type Launch struct {
	Path        string
	Args        []string // argv[1:]
	Cloneflags  uintptr
	UidMappings []procgroup.IDMap
	GidMappings []procgroup.IDMap
	AmbientCaps []uintptr

	spec      Spec
	agent     string
	agentArgs []string
}

// request is what the launcher reads on its request pipe (fd 3) and then
// acts on: the spec, and the agent's command and environment. None of it
// is on the launcher's command line or in its environment, so a launcher
// can be started before the agent is known (Start), and no other process
// can read the agent's environment off the launcher's.
type request struct {
	Spec Spec     `json:"spec"`
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
}

// requestFD is the launcher's descriptor of its request pipe.
const requestFD = 3

// gatewayFD is, for network "gateway", the launcher's end of a unix
// socketpair it sends the gateway's listening socket back on.
const gatewayFD = 4

// maxRequest bounds what the launcher reads: an environment and paths,
// which exec(2) would refuse long before this.
const maxRequest = 16 << 20

// Command checks that this kernel can enforce spec and returns how to start
// the launcher that runs path (resolved, absolute) with args inside it.
// launcher and launcherArgs are what Launcher returned: the dedicated
// launcher, or acpflow's executable and the hidden subcommand that calls
// Main.
//
// The error says which part cannot be enforced, so the step fails before
// anything is spawned.
func Command(launcher string, launcherArgs []string, spec Spec, path string, args []string) (Launch, error) {
	spec.Version = specVersion
	if err := spec.validate(); err != nil {
		return Launch{}, err
	}
	if err := spec.CheckPaths(); err != nil {
		return Launch{}, err
	}
	if !filepath.IsAbs(path) {
		return Launch{}, fmt.Errorf("sandbox: agent path %q is not absolute", path)
	}
	l, err := launchOf(launcher, launcherArgs, spec)
	l.spec, l.agent, l.agentArgs = spec, path, args
	return l, err
}

func (s Spec) network() Network {
	if s.Network == "" {
		return NetworkOn
	}
	return s.Network
}

// ownNetns says whether the agent gets a network namespace of its own:
// a loopback, and nothing else unless the launcher hands it out.
func (s Spec) ownNetns() bool {
	return s.network() == NetworkOff || s.network() == NetworkGateway
}

// validate is the one place a Spec's shape is checked, for Command and
// for the launcher alike.
func (s Spec) validate() error {
	if s.Version != specVersion {
		return fmt.Errorf("sandbox: launcher protocol %d, this launcher speaks %d: %s and acpflow come from different builds; install them together", s.Version, specVersion, LauncherName)
	}
	abs := func(what, p string) error {
		if p == "" {
			return fmt.Errorf("sandbox: %s is not set", what)
		}
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: %s %q is not an absolute path", what, p)
		}
		return nil
	}
	if err := abs("cwd", s.Cwd); err != nil {
		return err
	}
	if err := abs("tmp_dir", s.TmpDir); err != nil {
		return err
	}
	if err := abs("home", s.Home); err != nil {
		return err
	}
	for _, list := range []struct {
		what  string
		paths []string
	}{{"write", s.Write}, {"state_dirs", s.StateDirs}, {"deny", s.Deny}} {
		for _, p := range list.paths {
			if err := abs(list.what+" entry", p); err != nil {
				return err
			}
		}
	}
	switch s.network() {
	case NetworkOn, NetworkOff:
	case NetworkProxy:
		if s.ProxyPort < 1 || s.ProxyPort > 65535 {
			return fmt.Errorf("sandbox: network proxy needs a proxy port (1-65535), got %d", s.ProxyPort)
		}
	case NetworkGateway:
		if s.GatewayPort < 1 || s.GatewayPort > 65535 {
			return fmt.Errorf("sandbox: network gateway needs a gateway port (1-65535), got %d", s.GatewayPort)
		}
	default:
		return fmt.Errorf("sandbox: network %q is not on, off, proxy or gateway", s.Network)
	}
	// The check without symlinks costs no system call; Command resolves
	// them too (CheckPaths), which the launcher, started a moment later
	// with what Command wrote, does not pay for again.
	d := s.denyList()
	for _, w := range append([]string{s.Cwd, s.TmpDir}, s.Write...) {
		if e := d.covering(filepath.Clean(w)); e != "" {
			return fmt.Errorf("sandbox: writable path %s is inside the denied %s", w, e)
		}
	}
	return nil
}

// errNotEnforceable wraps what the kernel lacks.
var errNotEnforceable = errors.New("cannot be enforced on this kernel")

// ErrNeedsLinux is what Command's error wraps on a system other than
// Linux (sandbox_other.go): the sandbox is Landlock and namespaces, which
// only Linux has, so there it can never be enforced, whatever the spec.
var ErrNeedsLinux = errors.New("the sandbox needs Linux (Landlock and namespaces)")
