package acpagent

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// KeyMissing reports whether an agent of the preset whose environment is
// env (as it reaches the agent) and whose auth: is auth lacks what it reads
// its credentials from: it needs a key (Env), under the auth method that
// reads keys (or none set), none of them is set in env, and no login of
// the agent's own (LoginFiles) is under env's HOME.
func (p Preset) KeyMissing(auth string, env map[string]string) bool {
	if len(p.Env) == 0 || (p.KeyAuth != "" && auth != "" && auth != p.KeyAuth) {
		return false
	}
	for _, k := range p.Env {
		if env[k] != "" {
			return false
		}
	}
	if home := env["HOME"]; home != "" {
		for _, f := range p.LoginFiles {
			if _, err := os.Stat(filepath.Join(home, strings.TrimPrefix(f, "~/"))); err == nil {
				return false
			}
		}
	}
	return true
}

// RootMissing lists the variables of RootEnv that env lacks (or holds
// another value of): what the agent refuses to start as root without.
func (p Preset) RootMissing(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p.RootEnv)) {
		if env[k] != p.RootEnv[k] {
			out = append(out, k)
		}
	}
	return out
}

// KeyHint says how to give the preset's agent its credentials: the first
// key passed in its env:, or its own login. shell words it for a user who
// wrote no workflow file (acpflow prompt passes a preset's key that is
// set): an export, and --auth for the method that reads it.
func (p Preset) KeyHint(shell bool) string {
	if len(p.Env) == 0 {
		return ""
	}
	k := p.Env[0]
	var s string
	switch {
	case shell && p.KeyAuth != "":
		s = "export " + k + "=… and add --auth " + p.KeyAuth
	case shell:
		s = "export " + k + "=… before the run"
	case p.KeyAuth != "":
		s = "set auth: " + p.KeyAuth + ", set " + k + " and pass it in the agent's env: (" + k + ": ${{ env." + k + " }})"
	default:
		s = "set " + k + " and pass it in the agent's env: (" + k + ": ${{ env." + k + " }})"
	}
	if p.Login != "" {
		s += ", or log in with `" + p.Login + "`"
	}
	return s
}

// RootHint says how to give the preset's agent the variables it refuses
// to start as root without (RootEnv): in its env:, or, with shell, as
// exports (acpflow prompt's agent inherits them).
func (p Preset) RootHint(shell bool) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p.RootEnv)) {
		if shell {
			out = append(out, "export "+k+"="+p.RootEnv[k])
		} else {
			out = append(out, fmt.Sprintf("set %s: %q in the agent's env:", k, p.RootEnv[k]))
		}
	}
	return strings.Join(out, "; ")
}

// Explain is what a cause of the preset tells: what it means and, for a
// need, the preset's hint, in shell terms with shell (KeyHint).
func (p Preset) Explain(c Cause, shell bool) string {
	switch c.Needs {
	case NeedKey:
		return c.Says + ": " + p.KeyHint(shell)
	case NeedRoot:
		return c.Says + ": " + p.RootHint(shell)
	}
	return c.Says
}
