package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// streamingProvider is an Anthropic Messages server on loopback that
// answers each request with an event stream saying the next of its texts
// (the last again once they run out), one event per write, and counts the
// requests it got.
type streamingProvider struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
}

func startStreamingProvider(t *testing.T, texts ...string) *streamingProvider {
	t.Helper()
	p := &streamingProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		text := texts[min(p.requests, len(texts)-1)]
		p.requests++
		p.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range messagesStream(text) {
			fmt.Fprint(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// messagesStream is a Messages answer saying text as Anthropic streams it,
// an event at a time, with its usage.
func messagesStream(text string) []string {
	data := func(event, json string) string { return "event: " + event + "\ndata: " + json + "\n\n" }
	q, _ := json.Marshal(text)
	return []string{
		data("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":120,"output_tokens":1}}}`),
		data("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		data("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(q)+`}}`),
		data("content_block_stop", `{"type":"content_block_stop","index":0}`),
		data("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}`),
		data("message_stop", `{"type":"message_stop"}`),
	}
}

func (p *streamingProvider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// replayResult is the part of a run's result a replay is judged by.
type replayResult struct {
	RunID string `json:"run_id"`
	Steps map[string]struct {
		Status string         `json:"status"`
		Error  string         `json:"error"`
		Final  string         `json:"final"`
		Output string         `json:"output"`
		Usage  map[string]any `json:"usage"`
	} `json:"steps"`
}

// recordModelRun runs a workflow whose agent (the test agent, which
// streams its model's answers as claude does) goes through a recording
// gateway to prov, and returns the run's result.
func recordModelRun(t *testing.T, dir, state, rec, key string, prov *streamingProvider) replayResult {
	t.Helper()
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: recorded
agents:
  model-caller:
    command: %s
    args: %s
    gateway:
      key: ${{ env.GW_TEST_KEY }}
      upstream: %s
      api: anthropic
      base-url-env: ANTHROPIC_BASE_URL
      key-env: ANTHROPIC_API_KEY
      record: true
steps:
  - {id: ask, uses: acp-subagent, with: {agent: model-caller, prompt: "Say it twice."}}
`, testAgent, agentArgs("-no-chunks", "-call-model", "2", "-stream-model", "-record", rec), prov.URL))
	out := filepath.Join(dir, "recorded.json")
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": key}, nil, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("recording: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res replayResult
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// replayRun replays step ask of run runID with prompt, without the key in
// acpflow's environment; extra is more of the replay agent's keys ("": none).
func replayRun(t *testing.T, dir, state, runID, prompt, extra string) (result, replayResult) {
	t.Helper()
	wf := filepath.Join(dir, "replay.yaml")
	if err := os.WriteFile(wf, []byte(fmt.Sprintf(`name: replayed
agents:
  again: {builtin: replay, from: %s/ask%s}
steps:
  - {id: ask, uses: acp-subagent, with: {agent: again, prompt: %q}}
`, runID, extra, prompt)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "replayed.json")
	os.Remove(out)
	r := acpflowEnv(t, dir, nil, []string{"GW_TEST_KEY", "ANTHROPIC_API_KEY"}, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	var res replayResult
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	return r, res
}

func starts(t *testing.T, rec string) []map[string]any {
	var out []map[string]any
	for _, ev := range readRecords(t, rec) {
		if ev["event"] == "start" {
			out = append(out, ev)
		}
	}
	return out
}

// A run recorded through its gateway (record: true) replays offline: the
// recorded agent itself runs again, its model's answers streamed back from
// the recording, and the turn ends as it did, without the key and
// without a request to the provider.
func TestARecordedRunReplaysAgainstTheRealAgentOffline(t *testing.T) {
	dir := t.TempDir()
	state, rec := filepath.Join(dir, "state.db"), filepath.Join(dir, "rec.jsonl")
	key := "sk-canary-" + rand.Text()
	prov := startStreamingProvider(t, "First answer, «streamed».", "Second answer.")
	recorded := recordModelRun(t, dir, state, rec, key, prov)
	if n := prov.count(); n != 2 {
		t.Fatalf("the recording made %d model requests, want 2", n)
	}

	r, replayed := replayRun(t, dir, state, recorded.RunID, "Say it twice.", "")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := prov.count(); n != 2 {
		t.Errorf("the provider got %d requests during the replay, want none", n-2)
	}
	got, want := replayed.Steps["ask"], recorded.Steps["ask"]
	if got.Status != "succeeded" || got.Output != want.Output || !strings.Contains(got.Output, "First answer, «streamed».\nSecond answer.") {
		t.Errorf("replayed step %s with output %q, want succeeded with the recorded %q", got.Status, got.Output, want.Output)
	}
	if got.Usage["total_tokens"] != want.Usage["total_tokens"] || got.Usage["source"] != "gateway" {
		t.Errorf("replayed usage %v, want the recorded %v", got.Usage, want.Usage)
	}
	// The agent ran again (a second start), given the placeholder and a
	// gateway, never the key.
	ss := starts(t, rec)
	if len(ss) != 2 {
		t.Fatalf("the agent started %d times, want twice (recorded, replayed)", len(ss))
	}
	env := ss[1]["env"].(map[string]any)
	if !strings.HasPrefix(fmt.Sprint(env["ANTHROPIC_API_KEY"]), "acpflow-placeholder-") || !strings.HasPrefix(fmt.Sprint(env["ANTHROPIC_BASE_URL"]), "http://127.0.0.1:") {
		t.Errorf("the replayed agent's env: ANTHROPIC_API_KEY %v, ANTHROPIC_BASE_URL %v; want the placeholder and a gateway", env["ANTHROPIC_API_KEY"], env["ANTHROPIC_BASE_URL"])
	}
	assertAgentsGone(t, rec)

	// The exchanges are in the transcript, the stream byte for byte; the
	// key is nowhere.
	show := acpflow(t, dir, "show", recorded.RunID, "--transcript", "--state", state)
	if !strings.Contains(show.stdout, "model POST /v1/messages claude-sonnet-4-5 → 200") {
		t.Errorf("show --transcript does not show the model exchanges:\n%s", show.stdout)
	}
	raw := acpflow(t, dir, "show", recorded.RunID, "--transcript", "--json", "--state", state)
	if n := strings.Count(raw.stdout, `"dir":"model"`); n != 2 {
		t.Errorf("show --transcript --json has %d model exchanges, want 2:\n%s", n, raw.stdout)
	}
	export := acpflow(t, dir, "export", recorded.RunID, "--state", state)
	stream, _ := json.Marshal(strings.Join(messagesStream("First answer, «streamed»."), ""))
	if !strings.Contains(export.stdout, `"exchanges"`) || !strings.Contains(export.stdout, string(stream)) {
		t.Errorf("the export does not hold the recorded stream byte for byte:\n%s", export.stdout)
	}
	replayShow := acpflow(t, dir, "show", replayed.RunID, "--transcript", "--state", state)
	for what, text := range map[string]string{"show --transcript": show.stdout + replayShow.stdout + raw.stdout, "export": export.stdout,
		"store": readFile(t, state) + storeWAL(state), "replay's output": r.stdout + r.stderr} {
		if strings.Contains(text, key) {
			t.Errorf("the key is in the %s", what)
		}
		if strings.Contains(text, "acpflow-placeholder-") {
			t.Errorf("the placeholder is in the %s", what)
		}
	}
}

// A replay whose agent asks the model something the recording did not
// (here a third request) fails naming the request that diverged.
func TestAReplayWhoseAgentAsksSomethingElseFailsNamingTheDivergence(t *testing.T) {
	dir := t.TempDir()
	state, rec := filepath.Join(dir, "state.db"), filepath.Join(dir, "rec.jsonl")
	prov := startStreamingProvider(t, "one", "two")
	recorded := recordModelRun(t, dir, state, rec, "sk-test-"+rand.Text(), prov)

	r, replayed := replayRun(t, dir, state, recorded.RunID, "Say it thrice: model calls: 3", "")
	if r.code != 1 {
		t.Fatalf("replay: exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := "the replay diverged from the recording: model request 3 (POST /v1/messages) has no recorded answer"
	if st := replayed.Steps["ask"]; st.Status != "failed" || !strings.Contains(st.Error, want) {
		t.Errorf("step %s: %q, want failed with %q", st.Status, st.Error, want)
	}
	if n := prov.count(); n != 2 {
		t.Errorf("the provider got %d requests during the replay, want none", n-2)
	}
	assertAgentsGone(t, rec)
}

// Replayed under sandbox: {network: gateway}, the agent reaches its
// gateway and nothing else, and the turn is the recorded one: the replay
// needs no network at all.
func TestAReplayConfinedToItsGatewayNeedsNoNetwork(t *testing.T) {
	skipWithoutSandbox(t)
	dir := t.TempDir()
	state, rec := filepath.Join(dir, "state.db"), filepath.Join(dir, "rec.jsonl")
	prov := startStreamingProvider(t, "confined", "still confined")
	recorded := recordModelRun(t, dir, state, rec, "sk-test-"+rand.Text(), prov)

	r, replayed := replayRun(t, dir, state, recorded.RunID, "Say it twice.", ", sandbox: {network: gateway}")
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got, want := replayed.Steps["ask"].Output, recorded.Steps["ask"].Output; got != want {
		t.Errorf("replayed output %q, recorded %q", got, want)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, "replayed.json")), `"network":"gateway"`) {
		t.Errorf("the replay's sandbox is not network: gateway:\n%s", readFile(t, filepath.Join(dir, "replayed.json")))
	}
	if n := prov.count(); n != 2 {
		t.Errorf("the provider got %d requests during the replay, want none", n-2)
	}
	assertAgentsGone(t, rec)
}
