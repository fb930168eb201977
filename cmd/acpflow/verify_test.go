package main

import (
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps/acpsubagent/agentverify"
)

func TestVerifyPrintsTheAgentsWordsEscaped(t *testing.T) {
	var b strings.Builder
	printVerify(&b, []agentverify.Report{{Preset: "claude", Installed: true, Agent: "evil\x1b]0;owned\x07", Version: "1\r2",
		StartMode: "plan\x1b[2J", Unasked: []string{"execute rm\x1b[8m -rf"}, Changed: []string{"asks \x1b[31mnothing"}}})
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Fatalf("a control character reached the terminal:\n%q", out)
	}
	if !strings.Contains(out, "claude: CHANGED (evil") || !strings.Contains(out, "changed: asks ") {
		t.Errorf("the report lost its words:\n%s", out)
	}
}
