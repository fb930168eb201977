package workflows

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Environment is where a workflow would run, as far as its warnings go:
// acpflow's own environment, the outer policy, and whether acpflow runs
// as root.
type Environment struct {
	Ambient map[string]string
	Outer   policies.Outer
	Root    bool
}

// LoadWarnings loads path as Load does and returns, besides, the warnings
// of a valid file that a run in env would likely fail on: an agent whose
// preset documents a need (docs/agents) that its environment would not
// meet, such as claude's ANTHROPIC_API_KEY, or IS_SANDBOX=1 as root (at
// the agent's preset:); and an env.NAME an expression reads while NAME is
// not in env.Ambient (at its first reference, envWarnings). Each message
// starts "warning: ".
//
// # Notes
//
// Whether a key reaches the agent is judged as a spawn would build its
// environment: the agent's env: and the step's with.env (a value that is
// only ${{ env.NAME }} is NAME's value in env.Ambient; any other template
// counts as set), over env.Ambient as the step's env policy and the outer
// policy pass it. A WASM env policy is not run here: with one, a key set
// in env.Ambient counts as passed.
func LoadWarnings(path string, env Environment) (*engine.Workflow, Errors, error) {
	wf, j, err := LoadJudged(path)
	if err != nil {
		return nil, nil, err
	}
	return wf, j.Warnings(env), nil
}

// LoadJudged loads path as Load does and returns besides what judges it
// once where it runs is known (its warnings, as LoadWarnings; its
// sandboxes' paths): run knows that only once its backend has loaded the
// outer policy.
func LoadJudged(path string) (*engine.Workflow, *Judge, error) {
	src, err := ReadFile(path, "workflow")
	if err != nil {
		return nil, nil, err
	}
	wf, d, err := parse(path, src)
	if err != nil {
		return nil, nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		wf.File = abs
	}
	return wf, &Judge{d: d}, nil
}

// Judge judges a loaded workflow where it is about to run, each finding
// placed in the file as the loader's errors are.
type Judge struct{ d *decoder }

// Warnings are what a run in env would likely fail on (LoadWarnings).
func (j *Judge) Warnings(env Environment) Errors {
	warnings, covered := j.d.needWarnings(env)
	warnings = append(warnings, j.d.envWarnings(env, covered)...)
	warnings.sortByPosition()
	return warnings
}

// CheckSandboxes checks each step's sandbox paths (steps.SandboxChecker)
// with the filesystem as it is: a write: entry or a cwd that is, or
// resolves through symlinks into, a denied path is an error (Errors),
// placed on the value that set it, before anything runs (docs/sandbox.md).
// It reads the workflow as it is now: after run --sandbox.
func (j *Judge) CheckSandboxes(c steps.SandboxCheck) error {
	d := *j.d
	d.errorList = &errorList{file: j.d.file, lines: j.d.lines}
	for _, s := range d.steps {
		sc, ok := s.step.Run.(steps.SandboxChecker)
		if !ok {
			continue
		}
		if err := sc.CheckSandbox(c); err != nil {
			d.at(d.prepareErrorAt(s, err), "%s: %s", s.label, err)
		}
	}
	return d.result()
}

// needWarnings checks the needs of each agent with a preset, for each step
// that uses it (the step's policy and env decide what reaches it), one
// warning per agent and finding. covered are the variables of acpflow's
// environment a preset's need was judged from: a warning says so when one
// is missing, and a login may meet the need without it.
func (d *decoder) needWarnings(env Environment) (out Errors, covered map[string]bool) {
	covered = map[string]bool{}
	seen := map[string]bool{}
	for _, s := range d.steps {
		ss, ok := s.step.Run.(steps.SessionStep)
		if !ok {
			continue
		}
		name := ss.AgentName()
		a := d.agents[name]
		if a == nil || a.Builtin != "" {
			continue
		}
		p, ok := acpagent.LookupPreset(a.Preset)
		if !ok {
			continue
		}
		at := d.agentNodes[name]
		if at == nil {
			continue
		}
		if pn := at.get("preset"); pn != nil {
			at = pn
		}
		if a.Gateway != nil {
			// The gateway holds the key: the agent needs none of its own.
			if msg := gatewayKeyWarning(a, env); msg != "" && !seen[name+"\x00"+msg] {
				seen[name+"\x00"+msg] = true
				out = append(out, d.make(at.pos, "warning: "+msg))
			}
			continue
		}
		msgs, judged := presetNeeds(name, a, p, stepEnv(s), engine.PoliciesOf(d.wf, s.step).Env, env)
		for _, msg := range msgs {
			if !seen[name+"\x00"+msg] {
				seen[name+"\x00"+msg] = true
				out = append(out, d.make(at.pos, "warning: "+msg))
			}
		}
		for _, k := range judged {
			covered[k] = true
		}
	}
	return out, covered
}

// envWarnings warns, once per variable at its first reference in the
// file, of each env.NAME an expression reads while NAME is not set in
// env.Ambient: it renders as "", which a command or an agent then takes
// for a value (`echo "[]"`, a key that is empty). Not for the variables
// of covered (a preset's need was judged from it), nor where the
// expression tests NAME itself (engine.Expr.TestedEnv).
func (d *decoder) envWarnings(env Environment, covered map[string]bool) Errors {
	first := map[string]pos{}
	bare := map[string]bool{} // the first reference is in an if: or for-each:
	count := map[string]int{}
	var names []string
	for _, u := range d.exprs {
		tested := u.e.TestedEnv()
		for _, r := range u.e.Refs() {
			if r.Root != "env" || tested[r.Name] || covered[r.Name] {
				continue
			}
			if _, set := env.Ambient[r.Name]; set {
				continue
			}
			at := d.find(u.n, "env."+r.Name, 0)
			if p, seen := first[r.Name]; !seen || at.line < p.line || at.line == p.line && at.col < p.col {
				if !seen {
					names = append(names, r.Name)
				}
				first[r.Name], bare[r.Name] = at, u.bare
			}
			count[r.Name]++
		}
	}
	var out Errors
	for _, name := range names {
		msg := fmt.Sprintf("warning: env.%s is read here, and %s is not set in acpflow's environment (it renders as \"\"): export it before the run", name, name)
		if bare[name] {
			msg = fmt.Sprintf("warning: env.%s is read here, and %s is not set in acpflow's environment (an expression sees nil, which == \"\" is not): export it before the run, or test env.%s == nil, or give a default: env.%s ?? \"\"", name, name, name, name)
		}
		if more := count[name] - 1; more > 0 {
			msg += fmt.Sprintf(" (read in %d more %s)", more, plural(more, "place", "places"))
		}
		out = append(out, d.make(first[name], msg))
	}
	return out
}

// stepEnv is the step's with.env as written (values as strings).
func stepEnv(s *stepInfo) map[string]string {
	m, _ := s.rawWith["env"].(map[string]any)
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// onlyEnvRef is a value that is one reference to an environment variable.
var onlyEnvRef = regexp.MustCompile(`^\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

// presetNeeds says which of preset p's needs agent a (called name) would
// not have, given the step's own env and env policy, and what to do; and
// the variables of env.Ambient it judged (those a key or RootEnv variable
// is passed from as ${{ env.NAME }}).
func presetNeeds(name string, a *steps.Agent, p acpagent.Preset, own map[string]string, policy policies.Env, env Environment) (out, judgedVars []string) {
	explicit := map[string]string{}
	// from says, for an explicit value that is only ${{ env.NAME }}, its
	// field and NAME.
	type ref struct{ field, name string }
	from := map[string]ref{}
	set := func(field string, vals map[string]string) {
		for k, raw := range vals {
			switch m := onlyEnvRef.FindStringSubmatch(strings.TrimSpace(raw)); {
			case m != nil:
				explicit[k], from[k] = env.Ambient[m[1]], ref{field + "." + k, m[1]}
			case strings.Contains(raw, "${{"):
				explicit[k] = "(rendered at run time)"
				delete(from, k)
			default:
				explicit[k] = raw
				delete(from, k)
			}
		}
	}
	set("agents."+name+".env", a.Env)
	set("with.env", own)
	child, judged := reaching(policy, env, explicit, name)
	// The variables that give the preset's needs are judged here, set or
	// not: a key's absence can be met by a login.
	for _, k := range append(slices.Clone(p.Env), slices.Collect(maps.Keys(p.RootEnv))...) {
		if r, ok := from[k]; ok {
			judgedVars = append(judgedVars, r.name)
		}
	}

	if p.KeyMissing(a.Auth, child) {
		var why []string
		for i, k := range p.Env {
			r, isRef := from[k]
			_, isExplicit := explicit[k]
			switch {
			case isRef:
				why = append(why, fmt.Sprintf("%s is ${{ env.%s }}, and %s is %s in acpflow's environment: export it before the run", r.field, r.name, r.name, unsetOrEmpty(env.Ambient, r.name)))
			case isExplicit:
				why = append(why, fmt.Sprintf("%s is set empty in the agent's env:", k))
			case env.Ambient[k] != "" && judged:
				why = append(why, fmt.Sprintf("%s is set in acpflow's environment, but the env policy does not pass it (it keeps credentials from agents): add %s: ${{ env.%s }} under the agent's env:", k, k, k))
			case i == 0:
				why = append(why, fmt.Sprintf("%s is %s in acpflow's environment and not passed in the agent's env: export it and add %s: ${{ env.%s }} under the agent's env:", k, unsetOrEmpty(env.Ambient, k), k, k))
			default:
				why = append(why, fmt.Sprintf("%s is %s in acpflow's environment and not passed", k, unsetOrEmpty(env.Ambient, k)))
			}
		}
		msg := fmt.Sprintf("agent %q (preset %s) needs %s", name, p.Name, orList(p.Env))
		if p.KeyAuth != "" && a.Auth == "" {
			msg += fmt.Sprintf(" (with auth: %s)", p.KeyAuth)
		}
		if p.Login != "" {
			msg += " or a login with `" + p.Login + "`"
		}
		msg += ", which would not reach it: " + strings.Join(why, "; ")
		out = append(out, msg)
	}
	if env.Root {
		for _, k := range p.RootMissing(child) {
			out = append(out, fmt.Sprintf("agent %q (preset %s): acpflow runs as root, and the agent refuses to start as root without %s=%s in its env: add %s: %q under the agent's env:", name, p.Name, k, p.RootEnv[k], k, p.RootEnv[k]))
		}
	}
	return out, judgedVars
}

// reaching is the environment that would reach the agent: policy and the
// outer policy run over env.Ambient and explicit, when both are built-in
// rules (judged true); else, or should the policy fail, everything set.
func reaching(policy policies.Env, env Environment, explicit map[string]string, agent string) (map[string]string, bool) {
	rules := func(p policies.Env) bool {
		_, ok := p.(*policies.EnvRules)
		return ok || p == nil
	}
	judged := rules(policy)
	for _, o := range env.Outer {
		judged = judged && rules(o.Env)
	}
	if judged {
		dec, err := env.Outer.BuildEnv(context.Background(), policy, &policies.EnvRequest{
			Request:  policies.Request{Kind: "env", Agent: agent},
			Ambient:  env.Ambient,
			Explicit: explicit,
		})
		if err == nil && dec.Deny == "" {
			return dec.Env, true
		}
	}
	all := map[string]string{}
	for k, v := range env.Ambient {
		all[k] = v
	}
	for k, v := range explicit {
		all[k] = v
	}
	return all, false
}

// unsetOrEmpty says whether name is missing from env or set empty.
func unsetOrEmpty(env map[string]string, name string) string {
	if _, set := env[name]; set {
		return "empty"
	}
	return "not set"
}

// orList joins names with "or".
func orList(names []string) string {
	names = slices.Clone(names)
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
