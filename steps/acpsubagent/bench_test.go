package acpsubagent

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// BenchmarkStep is one acp-subagent step against the no-delay test agent:
// env policy, spawn, handshake, prompt, teardown. Compare with
// BenchmarkBareTurn, the least an SDK client does for the same turn.
func BenchmarkStep(b *testing.B) {
	agent := steps.NewAgent("fast")
	agent.Command = testAgent
	k := &Kind{}
	st, err := k.Prepare(steps.StepConfig{ID: "s", With: map[string]any{"agent": "fast", "prompt": "hello"}, Agents: map[string]*steps.Agent{"fast": agent}})
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	inv := &steps.Invocation{
		Workflow: "bench", RunID: "r", StepID: "s", Workspace: ws,
		With:    map[string]any{"agent": "fast", "prompt": "hello"},
		Ambient: policies.EnvMap(os.Environ()), Permission: policies.DefaultPermission(),
		Env: policies.DefaultEnv(), Events: steps.Discard{},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := st.Run(context.Background(), inv); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

func BenchmarkBareTurn(b *testing.B) {
	ws := b.TempDir()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(testAgent)
		cmd.Dir = ws
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		// The bare baseline: no policy, no routing, updates ignored.
		ignore := func(context.Context, string, json.RawMessage) (any, *acp.RequestError) { return nil, nil }
		conn := acp.NewConnection(ignore, in, out)
		conn.SetLogger(slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := acp.SendRequest[acp.InitializeResponse](conn, ctx, acp.AgentMethodInitialize, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
			b.Fatal(err)
		}
		sess, err := acp.SendRequest[acp.NewSessionResponse](conn, ctx, acp.AgentMethodSessionNew, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := acp.SendRequest[acp.PromptResponse](conn, ctx, acp.AgentMethodSessionPrompt, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("hello")}}); err != nil {
			b.Fatal(err)
		}
		in.Close()
		cmd.Wait()
		cancel()
	}
}
