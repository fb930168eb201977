package acpagent

// goose: Block's goose in ACP mode (`goose acp`). Not measured here:
// goose is a Rust binary published on GitHub releases and crates.io, not
// on npm or in Debian, and neither of those two was reachable from the
// machine where the other presets were measured. No settings are set:
// see docs/agents/goose.md for what is known and what is not.
var _ = registerPreset(Preset{
	Name: "goose", Command: "goose", Args: []string{"acp"},
	Description: "Block's goose in ACP mode",
	Notes:       "not measured by acpflow; uses the provider configured for goose; pass its key explicitly",
	Unasked:     "not measured: no settings are set, so whatever goose's own GOOSE_MODE says (its default, auto, runs tools without asking)",
	StateDirs:   []string{"~/.local/share/goose", "~/.local/state/goose"},
	// config.yaml (extensions: the commands of its MCP servers),
	// permission.yaml and permissions/, from goose's documentation.
	Settings: []string{"~/.config/goose"},
	Bin:      "goose", Install: "download goose from https://github.com/block/goose/releases (it is not on npm)",
})
