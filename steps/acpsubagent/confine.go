package acpsubagent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/confine"
)

// sandboxOf is the sandbox the attempt's agent runs in: the step's
// with.sandbox, else the agent's (the workflow's default included), under
// the outer policy (confine.Effective); nil for none.
func (s *subagent) sandboxOf(outer policies.Outer) *steps.Sandbox {
	sb := s.agent.Sandbox
	if s.sandboxSet {
		sb = s.sandbox
	}
	return confine.Effective(sb, outer)
}

// confinement is what the agent's sandbox asks of package confine, for an
// agent in cwd with env (its HOME, "" for acpflow's user's, and the
// variables that move its state: homeVars): the agent's part of it is its
// preset's state dirs, writable, and settings, read-only. agent is the
// step's, or the recorded one a replay runs.
func (s *subagent) confinement(agent *steps.Agent, sb *steps.Sandbox, cwd string, env map[string]string, workspace string, stateFiles []string) confine.Request {
	home := env["HOME"]
	r := confine.Request{Who: "agent " + agent.Name, Sandbox: sb, Cwd: cwd, Workspace: workspace,
		Home: home, StateFiles: stateFiles, Self: s.kind.Self}
	if home == "" {
		home = confine.UserHome()
	}
	if p, ok := acpagent.LookupPreset(agent.Preset); ok && filepath.IsAbs(home) {
		for _, d := range p.StateDirs {
			r.StateDirs = append(r.StateDirs, confine.Resolve(relocate(d, env), home, workspace))
		}
		for _, f := range p.Settings {
			r.Protect = append(r.Protect, confine.Resolve(relocate(f, env), home, workspace))
		}
	}
	return r
}

// homeVars are the variables that move a preset's "~/" directories, and
// with them its state and settings: the agents' own and the XDG base
// directories. A relative or templated value is ignored, as the agent
// itself would not find its files there either.
var homeVars = []struct{ dir, name string }{
	{"~/.claude", "CLAUDE_CONFIG_DIR"},
	{"~/.codex", "CODEX_HOME"},
	{"~/.copilot", "COPILOT_HOME"},
	{"~/.config", "XDG_CONFIG_HOME"},
	{"~/.local/share", "XDG_DATA_HOME"},
	{"~/.local/state", "XDG_STATE_HOME"},
	{"~/.cache", "XDG_CACHE_HOME"},
}

// relocate is the preset path p where env moves it (CODEX_HOME=/ci/codex
// makes ~/.codex/config.toml /ci/codex/config.toml), else p.
func relocate(p string, env map[string]string) string {
	for _, v := range homeVars {
		rest, ok := strings.CutPrefix(p, v.dir)
		if !ok || (rest != "" && rest[0] != '/') {
			continue
		}
		if dir := env[v.name]; filepath.IsAbs(dir) && !strings.Contains(dir, "${{") {
			return filepath.Join(dir, rest)
		}
	}
	return p
}

// confineSpec wraps the agent's command in the step's sandbox, setting
// how spec starts it; the preset's state dirs are made first
// (makeStateDir). A sandbox the host cannot enforce, when the step does
// not require it, is a warning and a record, not an error: the agent then
// runs as spec already says, unconfined.
func (a *attempt) confineSpec(sb *steps.Sandbox, env map[string]string, spec *procgroup.Spec, gw *gatewayRoute) (*confine.Confinement, error) {
	r := a.confinement(a.agent, sb, a.cwd, env, a.inv.Workspace, a.inv.StateFiles)
	if gw != nil {
		r.Gateway = gw.g // network: gateway serves it inside the sandbox
	}
	for _, d := range append(slices.Clone(r.StateDirs), r.Protect...) {
		makeStateDir(d)
	}
	npmCache := npxCache(spec.Path, &r)
	c, rec, err := confine.Wrap(r, env, spec.Path, spec.Args, a.inv.Emit)
	if c == nil {
		a.sandboxRecord = rec
		return nil, err
	}
	if npmCache != "" {
		env[npxCacheVar] = npmCache // after Start: an unenforced sandbox leaves env as it was
	}
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

var _ steps.SandboxChecker = (*subagent)(nil)

// CheckSandbox implements steps.SandboxChecker: the agent's sandbox (the
// step's, the agent's, the outer policy's) against its cwd as the file
// fixes it (with.cwd without ${{ }}, else the agent's, else the
// workspace) and its write: entries, with the agent's HOME where its env:
// fixes one. An error is placed on with.cwd or with.sandbox when the
// step sets them, else on with.agent (the agent's own sandbox: or cwd:).
func (s *subagent) CheckSandbox(c steps.SandboxCheck) error {
	sb := s.sandboxOf(c.Outer)
	if sb == nil {
		return nil
	}
	cwd := c.Workspace
	if s.agent.Cwd != "" {
		cwd = s.agent.Cwd
	}
	if s.withCwdSet {
		cwd = s.withCwd // "" when rendered at run time: checked at the spawn
	}
	if cwd != "" && !filepath.IsAbs(cwd) {
		cwd = filepath.Join(c.Workspace, cwd)
	}
	env := map[string]string{}
	for k, v := range s.agent.Env {
		if !strings.Contains(v, "${{") { // rendered at run time: checked at the spawn
			env[k] = v
		}
	}
	err := s.confinement(s.agent, sb, cwd, env, c.Workspace, c.StateFiles).Check()
	var pe *confine.PathError
	if !errors.As(err, &pe) {
		return err
	}
	at := steps.WithPath("agent")
	switch {
	case pe.Key == "cwd" && s.withCwdSet:
		at = steps.WithPath("cwd")
	case pe.Key == "write" && s.sandboxSet:
		at = steps.WithPath("sandbox", "write")
	}
	return &steps.FieldError{Path: at, Err: err}
}
