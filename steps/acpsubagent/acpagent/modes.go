package acpagent

import (
	"slices"
	"strings"
)

// autoModeIDs are session mode ids, lowercased without separators, that
// agents in general give to modes in which the agent, a classifier or a
// reviewer model decides alone: claude-agent-acp's auto, acceptEdits,
// bypassPermissions and dontAsk, gemini's yolo and autoEdit, codex's
// full-access modes, qwen's auto and yolo, Copilot's autopilot.
var autoModeIDs = map[string]bool{
	"auto": true, "autoedit": true, "acceptedits": true, "bypasspermissions": true, "bypass": true,
	"dontask": true, "yolo": true, "fullaccess": true, "agentfullaccess": true, "dangerfullaccess": true,
	"autoaccept": true, "autoapprove": true, "trust": true, "trusted": true,
	"autopilot": true, "allowall": true, "autonomous": true, "unattended": true, "noprompt": true,
}

// autoModeWords are words of a mode's name or description (or of a config
// value's) that say it decides alone, matched lowercase. They are
// deliberately wide: a mode that asks is seldom described with any of
// them, and one the guard judges wrongly costs a set-back, not a run.
var autoModeWords = []string{
	"bypass", "yolo", "without asking", "without approval", "without permission", "never ask",
	"handles permission", "decides permission", "auto-approve", "auto approve", "automatically approve",
	"accept edits", "accepts edits", "full access", "reviewer", "skip permission", "dangerously",
	"autopilot", "allow-all", "allow all", "allow_all", "allowall", "autonomous", "without user interaction",
	"without confirmation", "no confirmation", "unattended",
}

// DecidesAlone reports whether a session mode lets the agent run tools
// without asking the client: one the preset lists (Preset.AutoModes),
// one whose id (or the fragment or last segment of a URL id, as
// Copilot's "…/session-modes#autopilot") agents in general use for that,
// or one whose name or description says so. name and description may be
// "" (a mode: in a workflow file is known by its id alone).
func DecidesAlone(preset, id, name, description string) bool {
	if p, ok := LookupPreset(preset); ok {
		for _, m := range p.AutoModes {
			if m == id {
				return true
			}
		}
	}
	for _, part := range idParts(id) {
		if autoModeIDs[part] {
			return true
		}
	}
	return saysDecidesAlone(id + " " + name + " " + description)
}

// idParts are the keys an id is judged by: the whole id, and its last
// fragment or path segment, each lowercased without separators.
func idParts(id string) []string {
	key := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "", ".", "").Replace(s))
	}
	parts := []string{key(id)}
	if i := strings.LastIndexAny(id, "#/:"); i >= 0 && i+1 < len(id) {
		parts = append(parts, key(id[i+1:]))
	}
	return parts
}

// saysDecidesAlone reports whether text holds one of autoModeWords.
func saysDecidesAlone(text string) bool {
	text = strings.ToLower(text)
	for _, w := range autoModeWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// permissionWords are words of a config option's id, name or category
// that say it governs what the agent may do without asking (Copilot's
// allow_all, of category "permissions").
var permissionWords = []string{"permission", "approv", "allow", "yolo", "bypass", "autopilot", "autonomous"}

// IsPermissionOption reports whether a session config option governs
// permissions: its category is mode or names permissions or approvals,
// or its id or name does. Under a policy other than allow the mode guard
// keeps such an option at the value acpflow left it at.
func IsPermissionOption(id, name, category string) bool {
	if category == "mode" {
		return true
	}
	text := strings.ToLower(id + " " + name + " " + category)
	for _, w := range permissionWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}

// onValues are the value ids that turn a boolean-like option on.
var onValues = map[string]bool{"on": true, "true": true, "yes": true, "enabled": true, "enable": true, "1": true, "always": true}

// WidensConfig reports whether setting the config option id to value
// lets the agent decide alone: the mode option set to such a mode, an
// option named for deciding alone (allow_all, yolo, autopilot) turned on,
// or a permission option set to a value whose id, name or description
// says so. name and description are the value's, "" when unknown (a
// workflow file's config:).
func WidensConfig(preset, id, value, name, description string) bool {
	switch {
	case strings.EqualFold(id, "mode"):
		return DecidesAlone(preset, value, name, description)
	case DecidesAlone("", id, "", ""):
		return onValues[strings.ToLower(value)] || DecidesAlone("", value, name, description)
	case IsPermissionOption(id, "", ""):
		return DecidesAlone("", value, name, description)
	}
	return false
}

// decideAloneEnvWords are fragments of environment variable names, matched
// uppercase, that agents in general read to approve everything
// (COPILOT_ALLOW_ALL, a CLI's YOLO or AUTO_APPROVE switch).
var decideAloneEnvWords = []string{"ALLOW_ALL", "ALLOWALL", "YOLO", "AUTO_APPROVE", "AUTOAPPROVE", "BYPASS_PERMISSIONS", "DANGEROUSLY_SKIP", "SKIP_PERMISSIONS", "AUTOPILOT"}

// DecideAloneEnv reports whether the environment variable name, set to
// value, makes an agent decide alone: one its preset lists
// (Preset.DecideAloneEnv), whatever its value, or one whose name says so
// set to a value that turns a switch on (onValues). Under a policy other
// than allow it is dropped from the agent's environment.
//
// # Notes
//
// A name is matched by fragment, so it can say so by accident: a vision
// project's YOLO_CONFIG_DIR, a web app's CORS_ALLOW_ALL_ORIGINS. Asking
// for a switch's value keeps the settings that hold a path, a URL or a
// list, which are most such accidents; a guessed switch that is on is
// still dropped, with its warning.
func DecideAloneEnv(preset, name, value string) bool {
	if p, ok := LookupPreset(preset); ok && slices.Contains(p.DecideAloneEnv, name) {
		return true
	}
	if !onValues[strings.ToLower(strings.TrimSpace(value))] {
		return false
	}
	upper := strings.ToUpper(name)
	for _, w := range decideAloneEnvWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}
