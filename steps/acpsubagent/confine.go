package acpsubagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/acpflow/acpflow/internal/egress"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// SandboxSubcommand is the hidden subcommand of acpflow's binaries that
// runs sandbox.Main: the launcher a sandboxed agent is started through.
const SandboxSubcommand = "sandbox-exec"

// maxRefused bounds the refused hosts a sandbox record keeps.
const maxRefused = 100

// confinement is one spawn's sandbox (docs/sandbox.md): the launcher that
// applies it, the private temp dir and the network proxy it owns, and the
// record of what was enforced. The process's teardown releases it.
type confinement struct {
	launch sandbox.Launch
	tmp    string
	proxy  *egress.Proxy

	mu     sync.Mutex
	record steps.SandboxRecord
}

// sandboxOf is the sandbox the attempt's agent runs in: the step's
// with.sandbox, else the agent's (the workflow's default included), made
// required (and at least the default) when an outer policy file requires
// one; nil for none.
func (a *attempt) sandboxOf() *steps.Sandbox {
	sb := a.agent.Sandbox
	if a.sandboxSet {
		sb = a.sandbox
	}
	if a.inv.Outer.SandboxRequiredBy() != "" {
		if sb == nil {
			sb = &steps.Sandbox{Network: steps.NetworkOn}
		}
		if sb.Optional {
			required := *sb
			required.Optional = false
			sb = &required
		}
	}
	return sb
}

// confine prepares the agent's sandbox: a private temp dir (TMPDIR in env),
// the network proxy of a host list (its variables in env), and the
// launcher's command, checked against what this kernel enforces. The
// builtin agents (acpflow itself) are sandboxed like any other. It returns
// nil with no error when sb is optional and the kernel cannot enforce it:
// the agent then runs unsandboxed, and the warning is the step's record.
func (a *attempt) confine(sb *steps.Sandbox, env map[string]string, path string, args []string) (*confinement, error) {
	home := env["HOME"]
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("agent %s: sandbox: the agent's HOME %q is not an absolute path", a.agent.Name, home)
	}
	c := &confinement{record: steps.SandboxRecord{Enforced: true, Network: sb.Network, Allow: sb.Allow}}
	spec := sandbox.Spec{Cwd: a.cwd, Home: home, Network: sandbox.NetworkOn}
	abs := func(p string) string {
		if strings.HasPrefix(p, "~/") {
			return filepath.Join(home, p[2:])
		}
		if !filepath.IsAbs(p) {
			return filepath.Join(a.inv.Workspace, p)
		}
		return filepath.Clean(p)
	}
	for _, p := range sb.Write {
		spec.Write = append(spec.Write, abs(p))
	}
	for _, p := range sb.Deny {
		spec.Deny = append(spec.Deny, abs(p))
	}
	if p, ok := acpagent.LookupPreset(a.agent.Preset); ok {
		presetPaths(p, abs, &spec)
	}
	tmp, err := os.MkdirTemp("", "acpflow-sandbox-tmp-")
	if err != nil {
		return nil, fmt.Errorf("agent %s: sandbox: cannot make its temp dir: %w", a.agent.Name, err)
	}
	c.tmp, spec.TmpDir = tmp, tmp
	npmCache := npxCache(path, tmp, &spec)
	switch sb.Network {
	case steps.NetworkOff:
		spec.Network = sandbox.NetworkOff
	case steps.NetworkList:
		c.proxy, err = egress.Start(sb.Allow, c.refused)
		if err != nil {
			c.release()
			return nil, fmt.Errorf("agent %s: sandbox: cannot start its network proxy: %w", a.agent.Name, err)
		}
		spec.ProxyPort = c.proxy.Port()
		spec.Network = sandbox.NetworkProxy
	}
	self := a.kind.Self
	launcher, largs := sandbox.Launcher(self, []string{SandboxSubcommand})
	c.launch, err = sandbox.Command(launcher, largs, spec, path, args)
	if err != nil {
		c.release()
		if sb.Optional {
			return nil, &unenforced{err}
		}
		if errors.Is(err, sandbox.ErrNeedsLinux) {
			return nil, fmt.Errorf("agent %s: %w — set sandbox: {required: false} to run unconfined", a.agent.Name, err)
		}
		return nil, fmt.Errorf("agent %s: %w (sandbox: required; set required: false to run unsandboxed where the kernel cannot enforce it)", a.agent.Name, err)
	}
	env["TMPDIR"] = tmp
	if npmCache != "" {
		env[npxCacheVar] = npmCache
	}
	if c.proxy != nil {
		for _, kv := range c.proxy.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	c.record.LandlockABI = sandbox.Probe().LandlockABI
	c.record.Write = append(append([]string{a.cwd, tmp}, spec.StateDirs...), spec.Write...)
	c.record.Deny = spec.Denied()
	return c, nil
}

// makeStateDir creates a preset's state or settings directory that does
// not exist yet (0700), as the agent would on its first run: in the
// sandbox its HOME is read-only, a rule cannot name a path that is not
// there, and a settings directory stays read-only (measured: opencode
// exits at initialize on a fresh HOME, unable to make
// ~/.local/share/opencode or ~/.cache/opencode/bin; qwen unable to make
// ~/.qwen/extensions; claude keeps nothing without ~/.claude/projects).
// An entry with an extension (~/.claude.json) is a file the agent makes
// itself; it is left alone. A failure is left to the agent to report.
func makeStateDir(d string) {
	if filepath.Ext(strings.TrimPrefix(filepath.Base(d), ".")) != "" {
		return
	}
	if _, err := os.Lstat(d); os.IsNotExist(err) {
		os.MkdirAll(d, 0o700)
	}
}

// unenforced is a sandbox the kernel cannot enforce, asked with
// required: false: the agent runs unsandboxed.
type unenforced struct{ err error }

func (u *unenforced) Error() string { return u.err.Error() }

// refused records a host the proxy refused.
func (c *confinement) refused(at egress.Attempt) {
	if at.Allowed {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.record.Refused) < maxRefused {
		host := at.Host
		if at.Port > 0 {
			host = fmt.Sprintf("%s:%d", at.Host, at.Port)
		}
		if !slices.Contains(c.record.Refused, host) {
			c.record.Refused = append(c.record.Refused, host)
		}
	}
}

// recorded is what the sandbox enforced so far.
func (c *confinement) recorded() *steps.SandboxRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.record
	r.Refused = slices.Clone(r.Refused)
	return &r
}

// release stops the proxy and removes the temp dir; after the agent is
// gone.
func (c *confinement) release() {
	if c.proxy != nil {
		c.proxy.Close()
	}
	if c.tmp != "" {
		os.RemoveAll(c.tmp)
	}
}
