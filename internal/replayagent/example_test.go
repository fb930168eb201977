package replayagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/transcript"
)

// A recorded turn played to a client that answers its permission request otherwise: the
// replay says so and ends the turn with refusal.
func ExampleServe() {
	rec := &transcript.Step{Step: "fix", Attempt: 1, Messages: messages(
		to(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`),
		from(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"c1","title":"rm -rf build"},"options":[]}}`),
		to(`{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`),
		from(`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`),
	)}
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	go replayagent.Serve(context.Background(), rec, agentIn, agentOut, os.Stdout)
	lines := bufio.NewScanner(clientIn)
	next := func() (m struct {
		ID     json.RawMessage
		Method string
		Result json.RawMessage
	}) {
		lines.Scan()
		json.Unmarshal(lines.Bytes(), &m)
		return m
	}

	fmt.Fprintln(clientOut, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}`)
	req := next()
	fmt.Println("asked:", req.Method)
	fmt.Fprintf(clientOut, `{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":"reject"}}}`+"\n", req.ID)
	next() // the refused tool call, reported failed
	next() // the divergence, as an agent_message_chunk
	fmt.Println("turn:", string(next().Result))
	clientOut.Close()
	// Output:
	// asked: session/request_permission
	// replay: permission for "rm -rf build" was answered reject, the recording has allow: the recording ends here
	// turn: {"stopReason":"refusal"}
}
