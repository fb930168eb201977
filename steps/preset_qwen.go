package steps

// qwen: Qwen Code in ACP mode (npm @qwen-code/qwen-code).
var _ = registerPreset(Preset{
	Name: "qwen", Command: "qwen", Args: []string{"--acp"},
	Env:         []string{"OPENAI_API_KEY", "DASHSCOPE_API_KEY"},
	Description: "Qwen Code in ACP mode",
})
