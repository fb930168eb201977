package agentsetup

import (
	"encoding/json"
	"path/filepath"
)

func init() {
	setups["opencode"] = func(a *Agent, home, modelURL string) error {
		// The platform package's binary itself: opencode-ai's bin
		// (node_modules/.bin/opencode) is a stub that only fails until
		// the package's postinstall, which `npm ci --ignore-scripts`
		// skips, has hard-linked this binary over it. Setup joins the
		// name to node_modules/.bin.
		a.Command = filepath.Join("..", "opencode-linux-x64", "bin", "opencode")
		a.Env = append(a.Env,
			// No fetch of the models catalogue (it would look the
			// catalogue's host up at every start) and no update check.
			"OPENCODE_DISABLE_MODELS_FETCH=1",
			"OPENCODE_DISABLE_AUTOUPDATE=1",
			// opencode finds its config, data and cache by the XDG
			// variables, HOME only where they are unset; acpflow passes
			// them through (the realagents tests set XDG_CONFIG_HOME for
			// acpflow's own config), so they are pinned to this HOME.
			"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
			"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
			"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
			"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		)
		return writeOpencodeConfig(home, modelURL)
	}
}

// opencodeConfig is $HOME/.config/opencode/opencode.json for opencode
// 1.18.33: the model server as a provider of the openai-compatible kind
// (bundled in the binary: nothing is installed), its one model the
// default, no sharing and no update. Measured offline: a whole turn
// needs nothing else (initialize 5–18 s and session/new 1–10 s on a
// 2-CPU machine at load 7; its first start creates its database under
// $HOME/.local/share/opencode).
//
// Nothing here makes opencode ask: that is the opencode preset's
// (OPENCODE_PERMISSION and OPENCODE_CONFIG_CONTENT in its env), so that
// the tests see what a user's run gets.
func opencodeConfig(modelURL string) map[string]any {
	return map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		"model":      "scripted/scripted-model",
		"provider": map[string]any{
			"scripted": map[string]any{
				"npm":     "@ai-sdk/openai-compatible",
				"name":    "scripted",
				"options": map[string]any{"baseURL": modelURL + "/v1", "apiKey": "acpflow-dummy"},
				"models": map[string]any{
					"scripted-model": map[string]any{
						"name":      "scripted-model",
						"tool_call": true,
						"limit":     map[string]any{"context": 100000, "output": 8000},
					},
				},
			},
		},
	}
}

func writeOpencodeConfig(home, modelURL string) error {
	b, err := json.MarshalIndent(opencodeConfig(modelURL), "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(map[string]string{filepath.Join(home, ".config", "opencode", "opencode.json"): string(b)})
}
