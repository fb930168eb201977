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
// environment rendered empty (as a variable that is not set does), and
// why; never with a value (an empty one has none to show, and the others
// are not looked at).
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
		for _, m := range refs {
			name := m[1] + m[2]
			switch v, set := ambient[name]; {
			case !set:
				why = append(why, name+" is not set in acpflow's environment")
			case v == "":
				why = append(why, name+" is empty in acpflow's environment")
			}
		}
		if v, err := render(tmpl); err != nil || v != "" {
			continue
		}
		msg := fmt.Sprintf("%s: %s rendered empty", field, tmpl)
		if len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		out = append(out, msg)
	}
}

// warnEmptyEnv emits a warning for each env value of the agent and the
// step whose environment template rendered empty: an unset
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

// likelyCause says why a start or a turn that failed (err, with the
// agent's stderr tail) likely did: the first of the preset's Causes whose
// words are in either, else a need of the preset that env (the agent's
// environment, less the variables of unset, which a variable not set
// rendered) does not meet, else for an agent that asked for
// authentication (authRequired) how to give it some; and the env
// templates that rendered empty (emptied). "" when nothing is known. The
// hints are in shell terms for an agent whose file the user did not write
// (steps.Agent.ShellAdvice).
func likelyCause(agent *steps.Agent, err error, stderrTail string, env map[string]string, unset, emptied []string) string {
	var says []string
	p, preset := acpagent.LookupPreset(agent.Preset)
	text := err.Error() + "\n" + stderrTail
	matched := false
	if preset {
		for _, c := range p.Causes {
			if strings.Contains(text, c.Match) {
				says, matched = append(says, p.Explain(c, agent.ShellAdvice)), true
				break
			}
		}
	}
	if preset && !matched && env != nil {
		env = maps.Clone(env)
		for _, k := range unset {
			delete(env, k) // an empty key is no key
		}
		needs := unmetNeeds(p, agent.Auth, env, agent.ShellAdvice)
		says, matched = append(says, needs...), len(needs) > 0
	}
	if !matched && authRequired(text) {
		says = append(says, authHint(agent, p, preset))
	}
	if len(emptied) > 0 {
		says = append(says, strings.Join(emptied, "; "))
	}
	return strings.Join(says, "; ")
}

// authRequired tells whether an agent's error is ACP's auth_required
// (code -32000, "Authentication required"): the agent has no credentials,
// whatever the turn it said so in.
func authRequired(text string) bool {
	return strings.Contains(text, "(code -32000)") || strings.Contains(text, "Authentication required")
}

// authHint says how to give credentials to an agent that asked for them:
// the preset's key (KeyHint), else an auth method or a key of its own.
func authHint(agent *steps.Agent, p acpagent.Preset, preset bool) string {
	if preset && len(p.Env) > 0 {
		return "it has no credentials: " + p.KeyHint(agent.ShellAdvice)
	}
	if agent.ShellAdvice {
		return "it has no credentials: add --auth METHOD (acpflow probe lists the agent's methods), or export its key and add --env NAME"
	}
	return "it has no credentials: set auth: to one of its methods (acpflow probe lists them), or pass its key in the agent's env: (NAME: ${{ env.NAME }})"
}

// unmetNeeds says which of preset p's documented needs an agent whose
// environment is env does not meet, each as what to do (in shell terms
// with shell); nil when all are.
func unmetNeeds(p acpagent.Preset, auth string, env map[string]string, shell bool) []string {
	var out []string
	if p.KeyMissing(auth, env) {
		out = append(out, fmt.Sprintf("it likely has no credentials: %s did not reach it; %s", orList(p.Env), p.KeyHint(shell)))
	}
	if os.Geteuid() == 0 && len(p.RootMissing(env)) > 0 {
		out = append(out, fmt.Sprintf("acpflow runs as root, and %s refuses to start as root without %s: %s", p.Name, rootVars(p, p.RootMissing(env)), p.RootHint(shell)))
	}
	return out
}

// rootVars writes the variables of p.RootEnv named by keys as NAME=VALUE.
func rootVars(p acpagent.Preset, keys []string) string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + p.RootEnv[k]
	}
	return strings.Join(out, ", ")
}

// orList joins names with "or".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
