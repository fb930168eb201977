// Package confine is the sandbox of the process a step starts
// (docs/sandbox.md), one for every kind that starts one: acp-subagent's
// agent and shell's command run through the same launcher under the same
// rules. It reads a `sandbox:` value (Parse), decides which sandbox a step
// runs in under the outer policy (Effective), turns it into what the
// launcher enforces (a sandbox.Spec), owns what a spawn's sandbox needs
// beside it (a private temp dir, the proxy of a host list) and keeps the
// step's record of it.
//
// What only one kind knows comes in through Request: an agent preset's
// state dirs (acp-subagent), who the messages name, and the step's model
// gateway (acp-subagent with gateway:).
//
// # network: gateway
//
// An agent whose sandbox has network: gateway reaches its step's model
// gateway and nothing else. The step starts its gateway first and puts
// it in the Request; Wrap and Start do the rest:
//
//	g, _ := gateway.Start(cfg)       // the step's; closed after the agent's group is gone
//	env["ANTHROPIC_BASE_URL"] = g.URL() // the same URL inside the sandbox as outside
//	r.Gateway = g
//	c, rec, err := confine.Wrap(r, env, path, args, emit)
//	child, err := c.Start(spec) // serves g on the agent's own 127.0.0.1:g.Port()
//
// Without r.Gateway, Wrap fails with ErrNoGateway. With a sandbox the
// kernel cannot enforce (required: false), the agent runs unconfined and
// reaches g on the host's loopback at the same URL.
package confine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/internal/egress"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Subcommand is the hidden subcommand of acpflow's binaries that runs
// sandbox.Main: the launcher a sandboxed process is started through when
// the dedicated one is not installed beside acpflow.
const Subcommand = "sandbox-exec"

// Effective is the sandbox a step runs in: sb (the step's own, else its
// default), made required, and at least the defaults, when an outer
// policy file requires one; nil for none.
func Effective(sb *steps.Sandbox, outer policies.Outer) *steps.Sandbox {
	if outer.SandboxRequiredBy() == "" {
		return sb
	}
	if sb == nil {
		return &steps.Sandbox{Network: steps.NetworkOn}
	}
	if sb.Optional {
		required := *sb
		required.Optional = false
		return &required
	}
	return sb
}

// Request is one spawn's sandbox as a kind asks for it.
type Request struct {
	// Who names the process in messages: "agent claude", "step test".
	Who     string
	Sandbox *steps.Sandbox
	// Cwd is the process's working directory (absolute), writable.
	Cwd string
	// Workspace is what a relative write: or deny: entry is relative to.
	Workspace string
	// Home is the process's HOME: what "~/" and the default deny list are
	// resolved against. Empty: the home of the user acpflow runs as.
	Home string
	// StateDirs are writable besides the cwd (an agent preset's own,
	// absolute).
	StateDirs []string
	// Protect stay read-only even beneath a writable path (an agent
	// preset's settings files, which can hold hooks; absolute).
	Protect []string
	// StateFiles are acpflow's own (its run store, its state directory),
	// denied to every sandbox (steps.Invocation.StateFiles).
	StateFiles []string
	// Self is acpflow's executable, whose hidden Subcommand is the
	// launcher when none is installed beside it; "": os.Executable.
	Self string
	// Gateway is the step's model gateway (a *gateway.Gateway), which
	// network: gateway needs and nothing else uses: the process reaches
	// it at 127.0.0.1:Port() inside its sandbox, on a listener Start
	// hands to Serve. Nil: none (network: gateway is then an error).
	Gateway GatewayServer
}

// GatewayServer is what a sandbox with network: gateway needs of the
// step's model gateway (*gateway.Gateway is one).
type GatewayServer interface {
	// Port is the gateway's own loopback port: the agent's listener
	// takes the same number, so the gateway's URL is the same inside.
	Port() int
	// Serve serves the gateway on ln, a listener in the sandbox's network
	// namespace, until the gateway is closed, which closes ln.
	Serve(ln net.Listener)
}

// Resolve makes a sandbox path absolute: "~/" is home's, a relative path
// the workspace's.
func Resolve(p, home, workspace string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		return filepath.Join(workspace, p)
	}
	return filepath.Clean(p)
}

// UserHome is the home of the user acpflow runs as: $HOME, else the
// passwd entry's; "" when neither is known. The default deny list holds
// for it whatever HOME the process is given.
func UserHome() string {
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		return h
	}
	if u, err := user.Current(); err == nil && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return ""
}

// Spec is the part of the launcher's spec that names paths: what a
// workflow's preflight checks (sandbox.Spec.CheckPaths) before anything
// runs, and what start completes.
func (r Request) Spec() (sandbox.Spec, error) {
	home := r.Home
	if home == "" {
		home = UserHome()
	}
	if !filepath.IsAbs(home) {
		return sandbox.Spec{}, fmt.Errorf("%s: sandbox: HOME %q is not an absolute path", r.Who, home)
	}
	spec := sandbox.Spec{Cwd: r.Cwd, Home: home, UserHome: UserHome(), StateDirs: r.StateDirs, Protect: r.Protect, Network: sandbox.NetworkOn}
	for _, p := range r.Sandbox.Write {
		spec.Write = append(spec.Write, Resolve(p, home, r.Workspace))
	}
	for _, p := range r.Sandbox.Deny {
		spec.Deny = append(spec.Deny, Resolve(p, home, r.Workspace))
	}
	for _, p := range r.StateFiles {
		if filepath.IsAbs(p) && !slices.Contains(spec.Deny, p) {
			spec.Deny = append(spec.Deny, filepath.Clean(p))
		}
	}
	return spec, nil
}

// Check refuses, before anything runs, a writable path of the request
// that is or resolves through symlinks into a denied one: a *PathError
// naming both, and whether the cwd or a write: entry is at fault.
func (r Request) Check() error {
	spec, err := r.Spec()
	if err != nil {
		return err
	}
	write := spec.Write
	spec.Write = nil
	if err := spec.CheckPaths(); err != nil {
		return &PathError{Key: "cwd", Err: fmt.Errorf("%s: %w", r.Who, err)}
	}
	spec.Write, spec.Cwd = write, ""
	if err := spec.CheckPaths(); err != nil {
		return &PathError{Key: "write", Err: fmt.Errorf("%s: %w", r.Who, err)}
	}
	return nil
}

// PathError is a writable path of a sandbox that leads into a denied one:
// Key is "cwd" or "write", the key of the file that set it.
type PathError struct {
	Key string
	Err error
}

func (e *PathError) Error() string { return e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// Confinement is one spawn's sandbox: how to start the launcher that
// applies it, the private temp dir and the network proxy it owns, and the
// record of what was enforced. Release it once the process's group is
// gone.
type Confinement struct {
	launch  sandbox.Launch
	tmp     string
	proxy   *egress.Proxy
	gateway GatewayServer        // network: gateway's
	ln      net.Listener         // the gateway's listener in the sandbox, once started
	kernel  *sandbox.DenialWatch // nil where the kernel's refusals cannot be read (denials.go)
	// sweep are the protected paths that did not exist at the spawn:
	// what the process makes there is removed when it is gone.
	sweep []string

	mu     sync.Mutex
	record steps.SandboxRecord
}

// unenforced is the error of start for a sandbox the kernel cannot
// enforce, asked with required: false: the process runs unsandboxed, and
// skippedRecord is its record.
type unenforced struct{ Err error }

func (u *unenforced) Error() string { return u.Err.Error() }
func (u *unenforced) Unwrap() error { return u.Err }

// skippedRecord is the record of a sandbox that was not enforced (unenforced),
// and the warning the step reports.
func skippedRecord(sb *steps.Sandbox, err *unenforced) *steps.SandboxRecord {
	return &steps.SandboxRecord{Network: sb.Network, Allow: sb.Allow,
		Warning: "ran unsandboxed (required: false): " + err.Error()}
}

// start prepares the sandbox of a process that runs path with args: a
// private temp dir (TMPDIR in env), the network proxy of a host list (its
// variables in env), and the launcher's command, checked against what this
// kernel enforces. An *unenforced error (required: false on a kernel that
// cannot enforce it) leaves env as it was.
func start(r Request, env map[string]string, path string, args []string) (*Confinement, error) {
	if r.Home == "" {
		r.Home = env["HOME"]
	}
	spec, err := r.Spec()
	if err != nil {
		return nil, err
	}
	// A writable path into a denied one is refused whether or not the
	// sandbox is required: it is the workflow's mistake, not the kernel's.
	if err := spec.CheckPaths(); err != nil {
		return nil, fmt.Errorf("%s: %w; nothing was started", r.Who, err)
	}
	sb := r.Sandbox
	c := &Confinement{record: steps.SandboxRecord{Enforced: true, Network: sb.Network, Allow: sb.Allow}}
	if c.tmp, err = os.MkdirTemp("", "acpflow-sandbox-tmp-"); err != nil {
		return nil, fmt.Errorf("%s: sandbox: cannot make its temp dir: %w", r.Who, err)
	}
	spec.TmpDir = c.tmp
	switch sb.Network {
	case steps.NetworkOff:
		spec.Network = sandbox.NetworkOff
	case steps.NetworkList:
		if c.proxy, err = egress.Start(sb.Allow, c.refused); err != nil {
			c.Release()
			return nil, fmt.Errorf("%s: sandbox: cannot start its network proxy: %w", r.Who, err)
		}
		spec.ProxyPort, spec.Network = c.proxy.Port(), sandbox.NetworkProxy
	case steps.NetworkGateway:
		if r.Gateway == nil {
			c.Release()
			return nil, fmt.Errorf("%s: %w", r.Who, ErrNoGateway)
		}
		c.gateway, spec.GatewayPort, spec.Network = r.Gateway, r.Gateway.Port(), sandbox.NetworkGateway
	}
	if c.launch, err = launch(r, spec, path, args); err != nil {
		c.Release()
		return nil, err
	}
	env["TMPDIR"] = c.tmp
	if c.proxy != nil {
		for _, kv := range c.proxy.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	c.record.LandlockABI = sandbox.Probe().LandlockABI
	c.record.Write = append(append([]string{r.Cwd, c.tmp}, spec.StateDirs...), spec.Write...)
	c.record.Deny = spec.Denied()
	c.watchKernel()
	for _, p := range r.Protect {
		if _, err := os.Lstat(p); err != nil {
			c.sweep = append(c.sweep, p)
		}
	}
	return c, nil
}

// launch is how to start the launcher that runs path in spec, or why it
// cannot be.
func launch(r Request, spec sandbox.Spec, path string, args []string) (sandbox.Launch, error) {
	self := r.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			self = os.Args[0]
		}
	}
	launcher, largs := sandbox.Launcher(self, []string{Subcommand})
	l, err := sandbox.Command(launcher, largs, spec, path, args)
	switch {
	case err == nil:
		return l, nil
	case r.Sandbox.Optional:
		return l, &unenforced{err}
	case errors.Is(err, sandbox.ErrNeedsLinux):
		return l, fmt.Errorf("%s: %w — set sandbox: {required: false} to run unconfined", r.Who, err)
	}
	return l, fmt.Errorf("%s: %w (sandbox: required; set required: false to run unsandboxed where the kernel cannot enforce it)", r.Who, err)
}

// Wrap confines the process path and args name in r's sandbox: it
// returns the confinement to Start it with and release once the
// process's group is gone, and the record the step's result starts with.
// A sandbox the kernel cannot enforce, under required: false, is a
// warning through emit and a record, not an error: the confinement is
// then nil, and its Start starts the process unconfined.
func Wrap(r Request, env map[string]string, path string, args []string, emit func(steps.EventData)) (*Confinement, *steps.SandboxRecord, error) {
	c, err := start(r, env, path, args)
	var skipped *unenforced
	switch {
	case errors.As(err, &skipped):
		rec := skippedRecord(r.Sandbox, skipped)
		emit(steps.Warning{Message: r.Who + " " + rec.Warning})
		return nil, rec, nil
	case err != nil:
		return nil, nil, err
	}
	return c, c.Record(), nil
}

// Start starts the process spec describes in the sandbox, through its
// launcher, with spec's environment and descendant watch; spec's Path,
// Args and Dir are the ones Wrap was given. A nil confinement starts it
// as spec says, unconfined.
func (c *Confinement) Start(spec procgroup.Spec) (*procgroup.Child, error) {
	if c == nil {
		return procgroup.Start(spec)
	}
	if c.gateway == nil {
		return c.launch.Start(spec.Env, spec.OnDescendant)
	}
	child, f, err := c.launch.StartGateway(spec.Env, spec.OnDescendant)
	if err != nil {
		return nil, err
	}
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		child.Kill()
		child.Teardown(procgroup.Ladder{EOFGrace: time.Second, TermGrace: time.Second})
		return nil, fmt.Errorf("sandbox: the gateway's listener: %w", err)
	}
	c.ln = ln
	c.gateway.Serve(ln)
	return child, nil
}

// ErrNoGateway is the error of a sandbox with network: gateway for a
// process that has no model gateway: a shell step, or an agent without
// gateway:.
var ErrNoGateway = errors.New("sandbox: network: gateway lets the process reach its model gateway only, and it has none: only an agent with gateway: has one (use network: off for no network at all)")

func (c *Confinement) refused(at egress.Attempt) {
	if at.Allowed {
		return
	}
	host := at.Host
	if at.Port > 0 {
		host = fmt.Sprintf("%s:%d", at.Host, at.Port)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record.ProxyRefused(host)
}

// Record is what the sandbox enforced so far, the kernel's refusals
// included.
func (c *Confinement) Record() *steps.SandboxRecord {
	c.mu.Lock()
	r := c.record.Clone()
	c.mu.Unlock()
	return c.withKernelDenials(r) // it waits for late records: not under the lock
}

// QuarantineSuffix is added to a protected path the sandboxed process
// made (Release).
const QuarantineSuffix = ".acpflow-quarantined"

// Release stops the proxy, closes the gateway's listener in the sandbox,
// removes the temp dir and moves aside what the process made at a
// protected path; after the process's group is gone.
func (c *Confinement) Release() {
	if c.proxy != nil {
		c.proxy.Close()
	}
	if c.ln != nil {
		c.ln.Close() // the gateway's Close closes it too; this is for a gateway still open
	}
	c.kernel.Close()
	// A protected path missing at the spawn, in a state dir the agent
	// must be free to add to (sandbox.Spec.Protect), can be made in the
	// sandbox; what was made there must not outlive it (an agent's
	// settings with hooks, which its next session outside would run).
	// It is moved aside, not removed: a person may have made it meanwhile.
	for _, p := range c.sweep {
		if _, err := os.Lstat(p); err == nil {
			if os.Rename(p, p+QuarantineSuffix) != nil {
				os.RemoveAll(p)
			}
		}
	}
	if c.tmp != "" {
		os.RemoveAll(c.tmp)
	}
}
