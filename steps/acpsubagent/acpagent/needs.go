package acpagent

import (
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
// key passed in its env:, or its own login.
func (p Preset) KeyHint() string {
	if len(p.Env) == 0 {
		return ""
	}
	s := "set " + p.Env[0] + " and pass it in the agent's env: (" + p.Env[0] + ": ${{ env." + p.Env[0] + " }})"
	if p.KeyAuth != "" {
		s = "set auth: " + p.KeyAuth + ", " + s
	}
	if p.Login != "" {
		s += ", or log in with `" + p.Login + "`"
	}
	return s
}
