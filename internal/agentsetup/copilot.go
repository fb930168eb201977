package agentsetup

func init() {
	setups["copilot"] = func(a *Agent, _ string, modelURL string) error {
		a.Command = "copilot"
		a.Env = append(a.Env, copilotEnv(modelURL)...)
		return nil
	}
}

// copilotEnv points GitHub Copilot CLI 1.0.102 at the model server with
// its BYOK variables: a custom provider (Chat Completions at
// COPILOT_PROVIDER_BASE_URL, its default wire API), any key, a model name,
// and COPILOT_OFFLINE, which keeps it from GitHub's services (no login is
// needed with BYOK). Nothing here makes it ask: its default mode does, and
// the copilot preset keeps it there.
func copilotEnv(modelURL string) []string {
	return []string{
		"COPILOT_PROVIDER_BASE_URL=" + modelURL + "/v1",
		"COPILOT_PROVIDER_API_KEY=sk-acpflow-dummy",
		"COPILOT_MODEL=claude-sonnet-4.5",
		"COPILOT_OFFLINE=true",
	}
}
