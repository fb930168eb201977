package acpsubagent

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// What a user is told when an agent cannot work: a template of its env
// that rendered empty (before the spawn), the package that provides a
// command not on PATH, and the likely cause of a start that failed, from
// what its preset knows (acpagent.Preset's Bin, Install, Causes and
// needs). docs/acp-subagent.md#when-an-agent-does-not-start.

// envRef finds the environment variables an expression reads (env.NAME or
// env["NAME"]).
var envRef = regexp.MustCompile(`(?:^|[^.\w])env(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*["']([^"']+)["']\s*\])`)

// emptyEnv says, for one env value as the file wrote it (field names it:
// agents.claude.env.ANTHROPIC_API_KEY), which of its ${{ }} that read the
// environment rendered empty, or "null" (what a variable that is not set
// renders as), and why; never with a value (an empty one has none to
// show, and the others are not looked at).
func emptyEnv(field, raw string, ambient map[string]string, render func(string) (string, error)) []string {
	var out []string
	rest := raw
	for {
		i := strings.Index(rest, "${{")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return out
		}
		tmpl := rest[i : i+j+2]
		rest = rest[i+j+2:]
		refs := envRef.FindAllStringSubmatch(tmpl, -1)
		if len(refs) == 0 {
			continue
		}
		var why []string
		unset := false
		for _, m := range refs {
			name := m[1] + m[2]
			switch v, set := ambient[name]; {
			case !set:
				why, unset = append(why, name+" is not set in acpflow's environment"), true
			case v == "":
				why = append(why, name+" is empty in acpflow's environment")
			}
		}
		v, err := render(tmpl)
		if err != nil || !(v == "" || v == "null" && unset) {
			continue
		}
		as := "empty"
		if v == "null" {
			as = `as "null"`
		}
		msg := fmt.Sprintf("%s: %s rendered %s", field, tmpl, as)
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		out = append(out, msg)
	}
}

// warnEmptyEnv emits a warning for each env value of the agent and the
// step whose environment template rendered empty (or "null"): an unset
// key is the commonest reason a real agent fails, and it fails long after
// the spawn. The agent's variables so given are kept in a.unsetEnv.
func (a *attempt) warnEmptyEnv() {
	if a.inv.Render == nil {
		return
	}
	var found []string
	for _, k := range slices.Sorted(maps.Keys(a.agent.Env)) {
		msgs := emptyEnv("agents."+a.agent.Name+".env."+k, a.agent.Env[k], a.inv.Ambient, a.inv.Render)
		if len(msgs) > 0 {
			a.unsetEnv = append(a.unsetEnv, k)
		}
		found = append(found, msgs...)
	}
	for _, k := range slices.Sorted(maps.Keys(a.ownEnv)) {
		if raw, ok := a.ownEnv[k].(string); ok {
			msgs := emptyEnv("step "+a.inv.StepID+": with.env."+k, raw, a.inv.Ambient, a.inv.Render)
			if len(msgs) > 0 {
				a.unsetEnv = append(a.unsetEnv, k)
			}
			found = append(found, msgs...)
		}
	}
	for _, msg := range found {
		a.inv.Emit(steps.Warning{Message: msg})
	}
	a.emptyEnv = found
}

// notOnPath words a command that is not on PATH: for a preset's program,
// the package that provides it and how to install it.
func notOnPath(agent *steps.Agent) error {
	p, ok := acpagent.LookupPreset(agent.Preset)
	if !ok || p.Install == "" {
		return fmt.Errorf("agents.%s: command %q not found in PATH", agent.Name, agent.Command)
	}
	switch agent.Command {
	case p.Bin:
		return fmt.Errorf("agent %q: %s not found on PATH; install it with: %s", agent.Name, p.Bin, p.Install)
	case "npx":
		return fmt.Errorf("agent %q: npx not found on PATH; it comes with Node.js and npm: install Node.js, or install the agent with: %s (then set command: %s)", agent.Name, p.Install, p.Bin)
	}
	return fmt.Errorf("agent %q: command %q not found in PATH (the preset's agent installs with: %s)", agent.Name, agent.Command, p.Install)
}

// lookPath finds the agent's command, wording a missing one (notOnPath).
func lookPath(agent *steps.Agent) (string, error) {
	path, err := exec.LookPath(agent.Command)
	if err == nil {
		return path, nil
	}
	if strings.ContainsRune(agent.Command, os.PathSeparator) {
		return "", fmt.Errorf("agents.%s: command %q: %w", agent.Name, agent.Command, unwrapped(err))
	}
	return "", notOnPath(agent)
}

func unwrapped(err error) error {
	if e, ok := err.(*exec.Error); ok {
		return e.Err
	}
	return err
}

// likelyCause says why a start that failed (err, with the agent's stderr
// tail) likely did: the first of the preset's Causes whose words are in
// either, else a need of the preset that env (the agent's environment,
// less the variables of unset, which a variable not set rendered) does
// not meet; and the env templates that rendered empty (emptied). "" when
// nothing is known.
func likelyCause(agent *steps.Agent, err error, stderrTail string, env map[string]string, unset, emptied []string) string {
	var says []string
	p, preset := acpagent.LookupPreset(agent.Preset)
	text := err.Error() + "\n" + stderrTail
	matched := false
	if preset {
		for _, c := range p.Causes {
			if strings.Contains(text, c.Match) {
				says, matched = append(says, c.Says), true
				break
			}
		}
	}
	if preset && !matched && env != nil {
		env = maps.Clone(env)
		for _, k := range unset {
			delete(env, k) // "null" is no key
		}
		says = append(says, unmetNeeds(p, agent.Auth, env)...)
	}
	if len(emptied) > 0 {
		says = append(says, strings.Join(emptied, "; "))
	}
	return strings.Join(says, "; ")
}

// unmetNeeds says which of preset p's documented needs an agent whose
// environment is env does not meet, each as what to do; nil when all are.
func unmetNeeds(p acpagent.Preset, auth string, env map[string]string) []string {
	var out []string
	if p.KeyMissing(auth, env) {
		out = append(out, fmt.Sprintf("it likely has no credentials: %s did not reach it; %s", orList(p.Env), p.KeyHint()))
	}
	if os.Geteuid() == 0 {
		for _, k := range p.RootMissing(env) {
			out = append(out, fmt.Sprintf("acpflow runs as root, and %s refuses to start as root without %s=%s in its env: set %s: %q in the agent's env:", p.Name, k, p.RootEnv[k], k, p.RootEnv[k]))
		}
	}
	return out
}

// orList joins names with "or".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
