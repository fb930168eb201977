package steps

// goose: Block's goose in ACP mode.
var _ = registerPreset(Preset{
	Name: "goose", Command: "goose", Args: []string{"acp"},
	Description: "Block's goose in ACP mode",
	Notes:       "uses the provider configured for goose; pass its key explicitly",
})
