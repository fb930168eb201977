package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
)

// replayFixture is a hand-written transcript of one step of a claude turn (there is no capture
// to record one offline): a thought, a message in two chunks, an execute tool call asked about
// and allowed, its result, a last message. It doubles as an example of the file format.
var replayFixture = filepath.Join("testdata", "replay", "review.transcript.json")

// replayWorkflow runs step review on builtin replay from the fixture, which is copied next to
// it (from: is relative to the workflow file), under the given permission policy.
func replayWorkflow(t *testing.T, permission string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	b, err := os.ReadFile(replayFixture)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "review.transcript.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "elsewhere"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeWorkflow(t, dir, `name: review
agents:
  r: {builtin: replay, from: review.transcript.json}
steps:
  - id: review
    uses: acp-subagent
    with: {agent: r, prompt: "Review notes.txt and fix its typos."}
    policies: {permission: `+permission+`}
`)
	return dir
}

// replayStep runs the workflow of dir, from another directory, and returns the step's result.
func replayStep(t *testing.T, dir string) (code int, step map[string]any) {
	t.Helper()
	out := filepath.Join(dir, "results.jsonl")
	r := acpflow(t, filepath.Join(dir, "elsewhere"), "run", filepath.Join(dir, "wf.yaml"), "--output", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("exit %d, no results: %v\n%s", r.code, err, r.stderr)
	}
	var res struct {
		Steps map[string]map[string]any `json:"steps"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return r.code, res.Steps["review"]
}

func TestReplayGivesTheRecordedOutputAndPermissions(t *testing.T) {
	code, step := replayStep(t, replayWorkflow(t, "allow"))
	if code != 0 || step["status"] != "succeeded" || step["stop_reason"] != "completed" {
		t.Fatalf("exit %d, step %v", code, step)
	}
	// The recorded messages, the two chunks of the first joined, a blank line where the tool
	// call came between them.
	if want := "I'll read the notes first.\n\nOne typo: \"Teh\" should be \"The\"."; step["output"] != want {
		t.Errorf("output = %q, want %q", step["output"], want)
	}
	if step["session_id"] != "0a1b2c3d-replay" {
		t.Errorf("session_id = %v, want the recorded one", step["session_id"])
	}
	f, err := transcript.ReadFile(replayFixture)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(f.Steps[0].Permissions)
	var recorded []any
	json.Unmarshal(want, &recorded)
	if !reflect.DeepEqual(step["permissions"], recorded) {
		got, _ := json.Marshal(step["permissions"])
		t.Errorf("permissions\n\t%s\nwant the recorded\n\t%s", got, want)
	}
}

func TestReplayUnderAPolicyThatDecidesOtherwiseFailsWithRefusal(t *testing.T) {
	code, step := replayStep(t, replayWorkflow(t, "reject"))
	divergence := `replay: permission for "cat notes.txt" was answered reject, the recording has allow: the recording ends here`
	if code != 1 || step["status"] != "failed" || step["stop_reason"] != "refusal" {
		t.Fatalf("exit %d, step %v", code, step)
	}
	if msg, _ := step["error"].(string); !strings.Contains(msg, divergence) {
		t.Errorf("the error does not say where the replay left the recording:\n%s", msg)
	}
	if step["final"] != divergence {
		t.Errorf("final = %q, want the divergence", step["final"])
	}
	perms, _ := step["permissions"].([]any)
	if len(perms) != 1 || perms[0].(map[string]any)["decision"] != "reject" {
		t.Errorf("permissions = %v, want the one request, rejected", perms)
	}
}

func TestReplayFromWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `name: review
agents:
  r: {builtin: replay, from: 20261201T093000-none/review}
steps:
  - {id: review, uses: acp-subagent, with: {agent: r, prompt: hi}}
`)
	// Neither a file nor a run in the store: bad usage, and nothing starts.
	r := acpflow(t, dir, "run", wf)
	if want := "agent r: from: 20261201T093000-none/review: not a transcript file, nor a recorded run"; r.code != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "started") {
		t.Errorf("exit %d, want 2 and %q:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}
