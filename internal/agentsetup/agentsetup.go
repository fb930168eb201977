// Package agentsetup sets the real ACP agents of realagents/ up to complete
// whole turns offline against a scripted model server
// (internal/modelserver): for one agent, a fresh HOME and the server's
// URL, it writes the agent's config files and says how to spawn it. The
// realagents tests, the bench and `acpflow agents verify` all use it, so
// that what is measured and what a user verifies is what is tested.
//
// # Notes
//
// Args are only what the agent needs to speak ACP at all (gemini's --acp).
// A preset's own args and env (codex's approval settings, gemini's
// GEMINI_CLI_NO_RELAUNCH) are the caller's to add: a workflow with `preset:`
// gets them from acpflow, a bare client from acpagent.LookupPreset.
package agentsetup

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// setups are the agents Setup knows, each in a file of its own
// (claude.go, codex.go, …): it fills a (whose Env holds HOME already) and
// writes the agent's files under home. Command is the name under
// node_modules/.bin.
var setups = map[string]func(a *Agent, home, modelURL string) error{}

// Names are the agents Setup knows, in a stable order.
func Names() []string { return slices.Sorted(maps.Keys(setups)) }

// Agent is how to spawn one agent that Setup prepared.
type Agent struct {
	Name    string   // one of Names
	Command string   // absolute, under node_modules/.bin
	Args    []string // what the agent needs to speak ACP (see the package notes)
	// Env is the agent's explicit environment, KEY=VALUE: HOME, the model
	// server, a dummy key and the settings that keep it quiet.
	Env []string
	// Auth is the authenticate method to call before session/new, "" for
	// none.
	Auth string
}

// YAML is what goes under the agent in a workflow besides command, args
// and env (auth:), "" for nothing.
func (a Agent) YAML() string {
	if a.Auth == "" {
		return ""
	}
	return "auth: " + a.Auth
}

// Setup writes agent name's config files under home (a fresh, existing
// directory that becomes its HOME), pointing it at the model server at
// modelURL, and returns how to spawn it from nodeModules (where
// realagents/install.sh installed it).
func Setup(name, nodeModules, home, modelURL string) (Agent, error) {
	a, err := prepare(name, home, modelURL)
	if err != nil {
		return Agent{}, err
	}
	a.Command = filepath.Join(nodeModules, ".bin", a.Command)
	if _, err := os.Stat(a.Command); err != nil {
		return Agent{}, fmt.Errorf("agentsetup: %s: %w (run `bash realagents/install.sh` first)", name, err)
	}
	return a, nil
}

// ForCommand is Setup for an agent installed elsewhere: command is the
// program to spawn (`acpflow agents verify` finds it on PATH).
func ForCommand(name, command, home, modelURL string) (Agent, error) {
	a, err := prepare(name, home, modelURL)
	if err != nil {
		return Agent{}, err
	}
	a.Command = command
	return a, nil
}

// Known reports whether Setup knows agent name.
func Known(name string) bool { _, ok := setups[name]; return ok }

// prepare writes agent name's files under home and fills what to spawn
// but the command's path.
func prepare(name, home, modelURL string) (Agent, error) {
	setup, ok := setups[name]
	if !ok {
		return Agent{}, fmt.Errorf("agentsetup: unknown agent %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	a := Agent{Name: name, Env: []string{"HOME=" + home}}
	if err := setup(&a, home, modelURL); err != nil {
		return Agent{}, fmt.Errorf("agentsetup: %s: %w", name, err)
	}
	return a, nil
}

// writeFiles writes each file, creating its directory.
func writeFiles(files map[string]string) error {
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
