package acpsubagent

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// presetDir writes a preset's private files (acpagent.Preset.Files) into a
// new directory for one spawn and puts its path where the env names
// acpagent.PresetDirVar, and where the args do. It returns the directory ("" when the preset has no
// files), which the process's teardown removes.
//
// # Notes
//
// This is how a preset gives an agent settings that it reads only from a
// file (gemini's policies, a config file) without writing the user's own
// files under $HOME: the agent is pointed at the directory through an
// environment variable the preset sets. The directory is private (0700)
// and new for each process, so two steps never share one.
func presetDir(agent *steps.Agent, env map[string]string, args []string) (string, error) {
	p, ok := acpagent.LookupPreset(agent.Preset)
	if !ok || len(p.Files) == 0 {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "acpflow-preset-"+p.Name+"-")
	if err != nil {
		return "", fmt.Errorf("agent %s: preset %s: cannot make its config directory: %w", agent.Name, p.Name, err)
	}
	if err := writePresetFiles(dir, p.Files); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("agent %s: preset %s: %w", agent.Name, p.Name, err)
	}
	for k, v := range env {
		if strings.Contains(v, acpagent.PresetDirVar) {
			env[k] = strings.ReplaceAll(v, acpagent.PresetDirVar, dir)
		}
	}
	for i, arg := range args {
		args[i] = strings.ReplaceAll(arg, acpagent.PresetDirVar, dir)
	}
	return dir, nil
}

// presetMeta is the `_meta` a preset sends with session/new, nil for none.
func presetMeta(agent *steps.Agent) map[string]any {
	if p, ok := acpagent.LookupPreset(agent.Preset); ok {
		return p.Meta
	}
	return nil
}

// writePresetFiles writes files (name to content, acpagent.PresetDirVar in a
// content standing for dir) beneath dir.
//
// # Notes
//
// A file it cannot write is an error, never a skip: these files are what
// make gemini and qwen ask before they act (gemini's admin policy, qwen's
// ask rules), so an agent started without them would run on its own
// settings, unasked.
func writePresetFiles(dir string, files map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("cannot write its file: %w", err)
		}
		content := strings.ReplaceAll(files[name], acpagent.PresetDirVar, dir)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("cannot write its file: %w", err)
		}
	}
	return nil
}
