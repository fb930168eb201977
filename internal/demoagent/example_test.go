package demoagent_test

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/demoagent"
)

// The demo agent on a pair of pipes, driven by the SDK's client: the answer echoes the prompt
// and reports the option chosen for each `tool:` line.
func ExampleServe() {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	go demoagent.Serve(context.Background(), agentIn, agentOut)

	client := &testClient{answer: func(_ context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
		if *req.ToolCall.Kind == acp.ToolKindExecute {
			return selected("reject-once"), nil
		}
		return selected("allow-once"), nil
	}}
	conn := acp.NewClientSideConnection(client, clientOut, clientIn)
	conn.SetLogger(discardLogger())

	ctx := context.Background()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		fmt.Println(err)
		return
	}
	session, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/work", McpServers: []acp.McpServer{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := conn.Prompt(ctx, acp.PromptRequest{
		SessionId: session.SessionId,
		Prompt:    []acp.ContentBlock{acp.TextBlock("Tidy up\ntool: read README.md\ntool: execute rm -rf build")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	clientOut.Close() // EOF: Serve returns

	fmt.Print(strings.Join(client.chunks(), ""))
	fmt.Println(resp.StopReason)
	// Output:
	// demo agent received: Tidy up
	// permission read README.md: allow-once
	// permission execute rm -rf build: reject-once
	// demo agent: end of turn (2 tool requests).
	// end_turn
}
