package steps

// opencode: opencode in ACP mode (npm opencode-ai).
var _ = registerPreset(Preset{
	Name: "opencode", Command: "opencode", Args: []string{"acp"},
	Description: "opencode in ACP mode",
})
