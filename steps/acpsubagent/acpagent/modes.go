package acpagent

import "strings"

// autoModeIDs are session mode ids, lowercased without separators, that
// agents in general give to modes in which the agent, a classifier or a
// reviewer model decides alone: claude-agent-acp's auto, acceptEdits,
// bypassPermissions and dontAsk, gemini's yolo and autoEdit, codex's
// full-access modes, qwen's auto and yolo.
var autoModeIDs = map[string]bool{
	"auto": true, "autoedit": true, "acceptedits": true, "bypasspermissions": true, "bypass": true,
	"dontask": true, "yolo": true, "fullaccess": true, "agentfullaccess": true, "dangerfullaccess": true,
	"autoaccept": true, "autoapprove": true, "trust": true, "trusted": true,
}

// autoModeWords are words of a mode's name or description that say it
// decides alone, matched lowercase.
var autoModeWords = []string{
	"bypass", "yolo", "without asking", "without approval", "without permission", "never ask",
	"handles permission", "decides permission", "auto-approve", "auto approve", "automatically approve",
	"accept edits", "accepts edits", "full access", "reviewer", "skip permission", "dangerously",
}

// DecidesAlone reports whether a session mode lets the agent run tools
// without asking the client: one the preset lists (Preset.AutoModes),
// one whose id agents in general use for that, or one whose name or
// description says so. name and description may be "" (a mode: in a
// workflow file is known by its id alone).
func DecidesAlone(preset, id, name, description string) bool {
	if p, ok := LookupPreset(preset); ok {
		for _, m := range p.AutoModes {
			if m == id {
				return true
			}
		}
	}
	key := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(id))
	if autoModeIDs[key] {
		return true
	}
	text := strings.ToLower(name + " " + description)
	for _, w := range autoModeWords {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}
