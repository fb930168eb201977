package steps

import "time"

// gemini: Gemini CLI in ACP mode (npm @google/gemini-cli).
var _ = registerPreset(Preset{
	Name: "gemini", Command: "gemini", Args: []string{"--acp"},
	Env: []string{"GEMINI_API_KEY"}, Auth: []string{"gemini-api-key", "oauth-personal"},
	// Without it gemini re-launches itself as a child (to raise node's
	// heap limit), costing ~0.6 s of start, and the parent ignores
	// SIGTERM.
	SetEnv: map[string]string{"GEMINI_CLI_NO_RELAUNCH": "1"},
	// It exits on EOF by itself: ~40 ms after a turn without a tool
	// call, ~360 ms after one with a tool call (V8 finishing a GC on
	// its worker threads); SIGTERM to the group runs the same cleanup.
	// It does not advertise session/close.
	EOFGrace: 2 * time.Second, TermGrace: time.Second,
	Description: "Gemini CLI in ACP mode (npm @google/gemini-cli)",
	Notes:       "needs auth: gemini-api-key with GEMINI_API_KEY passed explicitly",
	Version:     "0.61.0",
	AutoModes:   []string{"yolo", "autoEdit", "auto_edit"},
})
