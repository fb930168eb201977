//go:build realagents

package realagents_test

import "testing"

// Qwen Code: agentsetup's test HOME only points it at the model server
// (auth type openai, Chat Completions at OPENAI_BASE_URL); what makes it
// ask (--approval-mode default and a system-defaults file of ask rules
// written per spawn) comes from `preset: qwen`, as for a user.
func init() {
	turnAgents["qwen"] = &turnAgent{
		name: "qwen",
		// A rejected call (its option "cancel", kind reject_once) ends its
		// turn with end_turn, measured on 0.24.4.
		endsTurnOnReject: true,
	}
}

func TestQwenCompletesAWholeTurn(t *testing.T) {
	t.Parallel()
	wholeTurn(t, "qwen")
}

func TestQwenAsksForEveryCommandAndWrite(t *testing.T) {
	t.Parallel()
	asksForEverything(t, "qwen")
}
