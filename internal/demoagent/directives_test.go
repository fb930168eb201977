package demoagent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/demoagent"
)

func TestServeAJSONLineIsTheFinalMessage(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")

	want := `{"verdict": "approve", "issues": [{"line": 3, "what": "a typo in the message"}]}`
	if stop := d.prompt(t, session, "Review the diff.\njson: "+want+"\n"); stop != acp.StopReasonEndTurn {
		t.Errorf("stop reason = %q, want end_turn", stop)
	}
	// The answer as ever, then a thought, then the JSON alone: the final message.
	updates, _ := client.snapshot()
	var messages []string
	var current *strings.Builder
	for _, u := range updates {
		switch {
		case u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil:
			if current == nil {
				current = &strings.Builder{}
			}
			current.WriteString(u.AgentMessageChunk.Content.Text.Text)
		case current != nil:
			messages = append(messages, current.String())
			current = nil
		}
	}
	if current != nil {
		messages = append(messages, current.String())
	}
	if len(messages) != 2 {
		t.Fatalf("%d agent messages %q, want the answer and then the JSON", len(messages), messages)
	}
	if !strings.HasPrefix(messages[0], "demo agent received: Review the diff.\n") {
		t.Errorf("first message = %q, want the usual answer", messages[0])
	}
	if messages[1] != want {
		t.Errorf("final message = %q, want exactly the json: line's text %q", messages[1], want)
	}
	if len(client.chunks()) < 4 {
		t.Errorf("the answers came in %d chunks, want them streamed as any answer is", len(client.chunks()))
	}
}

func TestServeAUsageLineIsReportedAsAnAdapterDoes(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")

	var costs []float64
	for i, tc := range []struct {
		line              string
		input, output     int
		wantCost, wantSum float64
	}{
		{"usage: input=1200 output=300 cost=0.02", 1200, 300, 0.02, 0.02},
		{"usage: output=10 input=5 cost=0.03 currency=EUR", 5, 10, 0.03, 0.05},
	} {
		resp, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock("Count.\n" + tc.line)}})
		if err != nil {
			t.Fatalf("turn %d: session/prompt: %v", i+1, err)
		}
		if u := resp.Usage; u == nil || u.InputTokens != tc.input || u.OutputTokens != tc.output || u.TotalTokens != tc.input+tc.output {
			t.Errorf("turn %d: prompt response usage = %+v, want input %d, output %d, total %d", i+1, u, tc.input, tc.output, tc.input+tc.output)
		}
		updates, _ := client.snapshot()
		var last *acp.SessionUsageUpdate
		for _, u := range updates {
			if u.UsageUpdate != nil {
				last = u.UsageUpdate
			}
		}
		if last == nil || last.Cost == nil {
			t.Fatalf("turn %d: no usage_update with a cost among %d updates", i+1, len(updates))
		}
		if last.Used != tc.input+tc.output {
			t.Errorf("turn %d: usage_update used = %d, want %d", i+1, last.Used, tc.input+tc.output)
		}
		costs = append(costs, last.Cost.Amount)
		if d := last.Cost.Amount - tc.wantSum; d > 1e-9 || d < -1e-9 {
			t.Errorf("turn %d: usage_update cost = %v, want the session's cumulative %v", i+1, last.Cost.Amount, tc.wantSum)
		}
	}
	if got := costs; len(got) == 2 && got[1] <= got[0] {
		t.Errorf("cumulative costs %v do not grow", got)
	}
}

func TestServeWithoutAUsageLineReportsNoUsage(t *testing.T) {
	client := &testClient{}
	d := startDemo(t, context.Background(), client)
	session := d.newSession(t, "/work")
	resp, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != nil {
		t.Errorf("usage = %+v, want none", resp.Usage)
	}
	updates, _ := client.snapshot()
	for _, u := range updates {
		if u.UsageUpdate != nil {
			t.Errorf("a usage_update without a usage: line: %+v", u.UsageUpdate)
		}
	}
}

func TestServeRefusesAUsageLineItCannotRead(t *testing.T) {
	d := startDemo(t, context.Background(), &testClient{})
	session := d.newSession(t, "/work")
	_, err := d.conn.Prompt(testContext(t), acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock("usage: input=12 cost=lots")}})
	wantInvalidParams(t, "session/prompt", err, "cost=lots")
}

func TestParseDirectives(t *testing.T) {
	for _, tc := range []struct {
		name, prompt string
		want         demoagent.Directives
		wantErr      string
	}{
		{name: "none", prompt: "just text\ntool: read a.go"},
		{name: "the first json line counts, trimmed", prompt: "x\n  json:  {\"a\": 1}  \njson: [2]",
			want: demoagent.Directives{JSON: `{"a": 1}`, HasJSON: true}},
		{name: "json that is not JSON is sent as written", prompt: "json: {oops",
			want: demoagent.Directives{JSON: "{oops", HasJSON: true}},
		{name: "usage without a cost", prompt: "usage: input=3 output=4",
			want: demoagent.Directives{Usage: &demoagent.Usage{Input: 3, Output: 4, Currency: "USD"}}},
		{name: "usage with a cost and a currency", prompt: "usage: cost=1.5 currency=EUR",
			want: demoagent.Directives{Usage: &demoagent.Usage{Cost: 1.5, HasCost: true, Currency: "EUR"}}},
		{name: "a negative count", prompt: "usage: input=-1", wantErr: "input=-1"},
		{name: "an unknown field", prompt: "usage: tokens=5", wantErr: `unknown field "tokens"`},
		{name: "a field without =", prompt: "usage: 5", wantErr: `"5" is not key=value`},
		{name: "an empty usage line", prompt: "usage:", wantErr: "no fields"},
		{name: "a currency that is not a code", prompt: "usage: currency=dollars", wantErr: "ISO 4217"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := demoagent.ParseDirectives(tc.prompt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tc.want)
			if string(g) != string(w) {
				t.Errorf("got %s, want %s", g, w)
			}
		})
	}
}
