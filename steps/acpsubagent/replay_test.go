package acpsubagent

import (
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps"
)

func TestAReplayRunsTheRecordedAgentWithTheReplaysOwnSettings(t *testing.T) {
	replay := steps.NewAgent("again")
	replay.Builtin, replay.From, replay.Reuse = "replay", "/tmp/rec.json", true
	replay.Env = map[string]string{"HOME": "/home/ci", "INITIAL_AGENT_MODE": "mine"}
	replay.Sandbox = &steps.Sandbox{}
	m := &transcript.Model{API: "openai", Upstream: "https://api.openai.com/v1",
		Agent: transcript.ModelAgent{Preset: "codex", Command: "npx", Args: []string{"-y", "@agentclientprotocol/codex-acp"},
			Mode: "read-only", Config: map[string]string{"model": "gpt-5.5"}}}
	ag := recordedAgent(replay, m)
	if ag.Builtin != "" || ag.From != "" || ag.Reuse {
		t.Errorf("builtin %q, from %q, reuse %v: want the recorded agent, never reused", ag.Builtin, ag.From, ag.Reuse)
	}
	if ag.Name != "again" || ag.Preset != "codex" || ag.Command != "npx" || len(ag.Args) != 2 || ag.Mode != "read-only" || ag.Config["model"] != "gpt-5.5" {
		t.Errorf("agent %+v: want the recording's preset, command, args, mode and config under the replay's name", ag)
	}
	if ag.Env["HOME"] != "/home/ci" || ag.Env["INITIAL_AGENT_MODE"] != "mine" {
		t.Errorf("env %v: want the replay's env over the preset's", ag.Env)
	}
	if ag.EOFGrace != 500*time.Millisecond || ag.Sandbox != replay.Sandbox {
		t.Errorf("eof grace %s, sandbox %v: want the preset's measured grace and the replay's sandbox", ag.EOFGrace, ag.Sandbox)
	}
	if g := ag.Gateway; g == nil || !g.Record || g.API != "openai" || g.Upstream != m.Upstream || g.Key != "" {
		t.Errorf("gateway %+v: want one that records again, on the recorded API and upstream, with no key", g)
	}
	if replay.Builtin != "replay" || replay.Gateway != nil {
		t.Errorf("the step's own agent was changed: %+v", replay)
	}
}
