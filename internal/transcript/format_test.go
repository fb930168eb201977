package transcript_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acpflow/acpflow/decisions"
	"github.com/acpflow/acpflow/internal/transcript"
)

var update = flag.Bool("update", false, "rewrite testdata/format.golden (only for a deliberate change of the format, with a new Format)")

// everyField is a transcript with every field of the format set, the
// permission record's included, and one attempt with none but the
// required ones (what omitempty leaves out, and null lists).
func everyField() *transcript.File {
	two := 2
	return &transcript.File{RunID: "run-1", Workflow: "wf", Steps: []transcript.Step{
		{Step: "plan", Index: &two, Attempt: 3, Agent: "claude", Truncated: true,
			Messages: []transcript.Message{
				{Dir: transcript.ToAgent, AtMS: 1, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/ws"}}`)},
				{Dir: transcript.FromAgent, AtMS: 25, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)},
			},
			Permissions: []decisions.Permission{{
				ToolCallID: "c1", Kind: "execute", Title: "make && make test", Command: "make && make test",
				Locations: []decisions.ToolLocation{{Path: "/ws/Makefile", Line: 7, InWorkspace: true}},
				Decision:  decisions.Ask, Would: decisions.Allow, Outcome: decisions.OutcomeSelected, OptionID: "allow-once",
				Layer: decisions.LayerOuter, Policy: "/etc/acpflow/policy.yaml", Rule: "2", Reason: "build",
				Ask: "person", PolicyStderr: "module says hi\n",
			}, {
				ToolCallID: "c2", Kind: "edit", Title: "edit", Decision: decisions.Reject, Outcome: decisions.OutcomeCancelled,
				Layer: decisions.LayerWorkflow, Policy: decisions.SourceStep, Rule: "default",
			}},
			Spawn: &transcript.Spawn{Policy: decisions.SourceWorkflow, Rule: "1", Deny: "no", Cwd: "/ws",
				Ambient: []string{"HOME", "PATH"}, Explicit: []string{"K"}, Env: []string{"PATH"}},
			Model: &transcript.Model{
				Agent: transcript.ModelAgent{Preset: "claude", Command: "npx", Args: []string{"-y", "pkg"}, Auth: "key",
					Mode: "default", Config: map[string]string{"model": "sonnet"}, BaseURLEnv: "BASE", KeyEnv: "KEY"},
				API: "anthropic", Upstream: "https://api.anthropic.com",
				Exchanges: []transcript.Exchange{{AtMS: 30, Method: "POST", Path: "/v1/messages", Model: "claude-sonnet-4-5",
					Status: 200, ContentType: "text/event-stream", Refused: "budget",
					Request: transcript.Body(`{"model":"claude-sonnet-4-5"}`), Response: transcript.Body("event: ping\ndata: {}\n\n"),
					RequestTruncated: true, ResponseTruncated: true},
					{AtMS: 40, Method: "POST", Path: "/v1/messages", Status: 200, Response: transcript.Body{0xff, 0x00, 'x'}}},
				Truncated: true,
			},
		},
		{Step: "bare", Attempt: 1, Messages: []transcript.Message{}},
	}}
}

// TestTheFormatIsPinned covers the class "the file format changed without
// a new Format": a field renamed, added, dropped or reordered in the
// format's own types, or in a type a record is converted from
// (decisions.Permission, whose JSON tags once were the format). Every
// field is written (testdata/format.golden holds what Write writes, byte
// for byte), and the golden file, as a transcript written before, reads
// back as the same transcript.
func TestTheFormatIsPinned(t *testing.T) {
	golden := filepath.Join("testdata", "format.golden")
	var b bytes.Buffer
	if err := everyField().Write(&b); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("Write wrote another format than %s:\n%s", golden, b.Bytes())
	}

	t.Run("a file written before reads back as it was written", func(t *testing.T) {
		got, err := transcript.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		wantFile := everyField()
		wantFile.Format = transcript.Format
		for i := range wantFile.Steps {
			wantFile.Steps[i] = compact(wantFile.Steps[i])
		}
		for i := range got.Steps {
			got.Steps[i] = compact(got.Steps[i])
		}
		if !reflect.DeepEqual(got, wantFile) {
			gotJSON, _ := json.MarshalIndent(got, "", " ")
			wantJSON, _ := json.MarshalIndent(wantFile, "", " ")
			t.Errorf("read back:\n%s\nwant:\n%s", gotJSON, wantJSON)
		}
	})

	t.Run("a step encoded alone is in the format", func(t *testing.T) {
		// transcripttest and any other writer of a bare Step get the
		// format's names too.
		s := everyField().Steps[0]
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back transcript.Step
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(compact(back), compact(s)) {
			t.Errorf("a step round-trips as\n%+v\nwant\n%+v", back, s)
		}
		var keys map[string]json.RawMessage
		json.Unmarshal(b, &keys)
		var perms []map[string]any
		json.Unmarshal(keys["permissions"], &perms)
		for _, k := range []string{"tool_call_id", "kind", "title", "command", "locations", "decision", "would", "outcome", "option_id", "layer", "policy", "rule", "reason", "ask", "policy_stderr"} {
			if _, ok := perms[0][k]; !ok {
				t.Errorf("a permission record has no %q: %s", k, keys["permissions"])
			}
		}
	})
}
