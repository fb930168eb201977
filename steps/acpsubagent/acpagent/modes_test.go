package acpagent

import "testing"

// The class is "a mode, option value or variable that lets an agent
// decide alone, told by a preset's list, an id (or its URL fragment) or
// words, and nothing that asks".
func TestWhatLetsAnAgentDecideAloneIsToldByIdFragmentAndWords(t *testing.T) {
	const desc = "Autonomous mode that enables allow-all and runs until task completion without user interaction (experimental)"
	for _, tt := range []struct {
		name         string
		id, nm, dsc  string
		decidesAlone bool
	}{
		{"Copilot's autopilot by its fragment", "https://agentclientprotocol.com/protocol/session-modes#autopilot", "", "", true},
		{"Copilot's autopilot by its words", "m3", "Autopilot", desc, true},
		{"Copilot's agent mode", "https://agentclientprotocol.com/protocol/session-modes#agent", "Agent", "Default agent mode for conversational interactions", false},
		{"a plan mode", "plan", "Plan", "Plan mode for creating and executing multi-step plans", false},
		{"allow-all by id", "allow-all", "", "", true},
		{"bypass by words", "x", "", "Bypass every check", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecidesAlone("", tt.id, tt.nm, tt.dsc); got != tt.decidesAlone {
				t.Errorf("DecidesAlone(%q, %q, %q) = %v", tt.id, tt.nm, tt.dsc, got)
			}
		})
	}
	for _, tt := range []struct {
		id, value string
		widens    bool
	}{
		{"allow_all", "on", true}, {"allow_all", "off", false}, {"yolo", "true", true},
		{"mode", "https://x/session-modes#autopilot", true}, {"mode", "plan", false},
		{"sandbox", "true", false}, {"model", "on", false}, {"permissions", "allow-all", true},
	} {
		if got := WidensConfig("", tt.id, tt.value, "", ""); got != tt.widens {
			t.Errorf("WidensConfig(%q, %q) = %v", tt.id, tt.value, got)
		}
	}
	for _, tt := range []struct {
		preset, name, value string
		drop                bool
	}{
		{"", "COPILOT_ALLOW_ALL", "true", true}, {"", "GEMINI_YOLO", "1", true},
		{"", "OPENAI_API_KEY", "true", false}, {"", "HOME", "/home/u", false},
		// a name that says so by accident, holding no switch
		{"", "YOLO_CONFIG_DIR", "/home/u/.config/Ultralytics", false},
		{"", "COPILOT_ALLOW_ALL", "/tmp", false},
		// the preset's own list is dropped whatever its value
		{"copilot", "COPILOT_ALLOW_ALL", "", true},
	} {
		if got := DecideAloneEnv(tt.preset, tt.name, tt.value); got != tt.drop {
			t.Errorf("DecideAloneEnv(%q, %q, %q) = %v", tt.preset, tt.name, tt.value, got)
		}
	}
}
