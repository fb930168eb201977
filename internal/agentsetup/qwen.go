package agentsetup

import (
	"encoding/json"
	"path/filepath"
)

func init() {
	setups["qwen"] = func(a *Agent, home, modelURL string) error {
		a.Command = "qwen"
		// Its OpenAI auth reads these three (auth type openai, chosen in
		// settings.json, so no authenticate call is needed).
		a.Env = append(a.Env,
			"OPENAI_API_KEY=acpflow-dummy",
			"OPENAI_BASE_URL="+modelURL+"/v1",
			"OPENAI_MODEL=scripted-model",
		)
		return writeQwenConfig(home)
	}
}

// qwenSettings is $HOME/.qwen/settings.json for Qwen Code 0.24.4: the
// OpenAI-compatible auth (Chat Completions at OPENAI_BASE_URL), no usage
// statistics, telemetry or update check.
//
// Nothing here makes qwen ask: that is the qwen preset's (--approval-mode
// default and a system-defaults file with ask rules, written per spawn),
// so that the tests see what a user's run gets.
var qwenSettings = map[string]any{
	"security":  map[string]any{"auth": map[string]any{"selectedType": "openai"}},
	"model":     map[string]any{"name": "scripted-model"},
	"privacy":   map[string]any{"usageStatisticsEnabled": false},
	"telemetry": map[string]any{"enabled": false},
	"general":   map[string]any{"enableAutoUpdate": false, "disableAutoUpdate": true, "disableUpdateNag": true},
}

func writeQwenConfig(home string) error {
	b, err := json.MarshalIndent(qwenSettings, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(map[string]string{filepath.Join(home, ".qwen", "settings.json"): string(b)})
}
