package main

// End to end: mcp-servers and attach (issue 13, parts 3 and 4), through the
// real binary on workflow files, against the test agent, which sums up
// what it was sent (-echo-request) and records it (-record).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// The test agent's -echo-request line, decoded.
type echoedRequest struct {
	MCPServers []struct {
		Name, Type, Command, URL string
		Args, Env, Headers       []string
	} `json:"mcpServers"`
	Prompt []struct {
		Type, URI, Name, MimeType string
		Size                      *int64
		TextBytes                 *int
		DataBytes                 *int
	} `json:"prompt"`
}

// secretsAbsent fails t for every secret found in what acpflow printed or
// stored: its --json events, its error output, `show --json`, and the
// bytes of the run store's files.
func secretsAbsent(t *testing.T, dir, state, runID string, printed result, secrets ...string) {
	t.Helper()
	shown := acpflow(t, dir, "show", runID, "--json", "--state", state)
	if shown.code != 0 {
		t.Fatalf("show: exit %d\n%s", shown.code, shown.stderr)
	}
	places := map[string]string{
		"run --json": printed.stdout, "run's stderr": printed.stderr,
		"show --json": shown.stdout, "show's stderr": shown.stderr,
	}
	files, _ := filepath.Glob(state + "*") // the database, its WAL and shared memory
	if len(files) == 0 {
		t.Fatalf("no run store at %s", state)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		places["the store's "+filepath.Base(f)] = string(b)
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s carries the secret %q", where, s)
			}
		}
	}
}

// runID is the run id of a --output file's one result.
func runID(t *testing.T, output string) string {
	t.Helper()
	var res struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(readFile(t, output)), &res); err != nil || res.RunID == "" {
		t.Fatalf("no run id in %s: %v", output, err)
	}
	return res.RunID
}

func TestTheAgentGetsItsMCPServersAndTheStepsFilesAndNoSecretIsRecorded(t *testing.T) {
	const (
		envSecret    = "gh-pat-from-the-environment-4821"
		headerSecret = "literal-header-secret-7730"
		replaced     = "replaced-header-secret-1166"
	)
	t.Setenv("E2E_GH_PAT", envSecret)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	for name, body := range map[string]string{
		"README.md": "# the project\n", "docs/plan.md": "1. build\n2. test\n",
		"shot.png": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "data.bin": "\x00\x01\x02\x03",
	} {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: tools
inputs:
  doc: {type: string, default: plan.md}
agents:
  a:
    command: %s
    args: %s
    mcp-servers:
      - name: github
        command: github-mcp-server
        args: [stdio]
        env: {GITHUB_PAT: "${{ env.E2E_GH_PAT }}"}
      - {name: docs, type: http, url: "https://docs.example/mcp", headers: {Authorization: "Bearer %s"}}
steps:
  - id: s
    uses: acp-subagent
    with:
      agent: a
      prompt: read these
      mcp-servers:
        - {name: docs, type: http, url: "https://docs.internal/mcp", headers: {X-Api-Key: %s}}
        - {name: fs, command: fs-mcp, args: ["${{ run.workspace }}"]}
      attach: [README.md, "docs/${{ inputs.doc }}", shot.png, data.bin]
`, testAgent, agentArgs("-record", record, "-echo-request", "-no-chunks", "-mcp-capabilities", "http",
		"-prompt-capabilities", "embeddedContext,image"), replaced, headerSecret))
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", state, "--workspace", ws)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)

	var res struct {
		Steps map[string]struct{ Output string }
	}
	json.Unmarshal([]byte(readFile(t, out)), &res)
	var got echoedRequest
	if err := json.Unmarshal([]byte(res.Steps["s"].Output), &got); err != nil {
		t.Fatalf("the agent's answer is not its summary: %v\n%q", err, res.Steps["s"].Output)
	}
	servers := fmt.Sprintf("%+v", got.MCPServers)
	want := ("[{Name:github Type:stdio Command:github-mcp-server URL: Args:[stdio] Env:[GITHUB_PAT] Headers:[]} " +
		"{Name:docs Type:http Command: URL:https://docs.internal/mcp Args:[] Env:[] Headers:[X-Api-Key]} " +
		"{Name:fs Type:stdio Command:fs-mcp URL: Args:[" + ws + "] Env:[] Headers:[]}]")
	if servers != want {
		t.Errorf("the agent got the servers\n%s\nwant (the agent's, the step's docs in its place, the step's fs)\n%s", servers, want)
	}
	var blocks []string
	for _, b := range got.Prompt {
		s := b.Type + " " + b.URI
		if b.MimeType != "" {
			s += " " + b.MimeType
		}
		if b.Size != nil {
			s += fmt.Sprintf(" size %d", *b.Size)
		}
		if b.TextBytes != nil {
			s += fmt.Sprintf(" text %d", *b.TextBytes)
		}
		if b.DataBytes != nil {
			s += fmt.Sprintf(" data %d", *b.DataBytes)
		}
		blocks = append(blocks, s)
	}
	uri := func(name string) string { return "file://" + filepath.Join(ws, name) }
	wantBlocks := []string{
		"text  text 10",
		"resource " + uri("README.md") + " text/markdown text 14",
		"resource " + uri("docs/plan.md") + " text/markdown text 17",
		"image " + uri("shot.png") + " image/png data 24",
		"resource_link " + uri("data.bin") + " size 4",
	}
	if strings.Join(blocks, "\n") != strings.Join(wantBlocks, "\n") {
		t.Errorf("the prompt's blocks:\n%s\nwant\n%s", strings.Join(blocks, "\n"), strings.Join(wantBlocks, "\n"))
	}

	// The values reached the agent, exactly as given, in its own record
	// (a file of the test's, not acpflow's).
	sessions := agentrecord.Named(record, "session_new")
	if len(sessions) != 1 {
		t.Fatalf("%d session/new, want 1", len(sessions))
	}
	sent, _ := json.Marshal(sessions[0]["params"])
	for _, s := range []string{`{"name":"GITHUB_PAT","value":"` + envSecret + `"}`, `{"name":"X-Api-Key","value":"` + headerSecret + `"}`} {
		if !strings.Contains(string(sent), s) {
			t.Errorf("session/new lacks %s:\n%s", s, sent)
		}
	}
	if strings.Contains(string(sent), replaced) {
		t.Errorf("session/new carries the agent's docs server, which the step's replaced:\n%s", sent)
	}
	secretsAbsent(t, dir, state, runID(t, out), r, envSecret, headerSecret, replaced)
}

func TestAMissingAttachmentFailsTheStepBeforeTheSpawn(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	os.WriteFile(filepath.Join(dir, "here.md"), []byte("here"), 0o644)
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: attach
agents:
  a: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi, attach: [here.md, notes/missing.md]}}
`, testAgent, agentArgs("-record", record)))
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if want := "with.attach: notes/missing.md does not exist"; !strings.Contains(readFile(t, out), want) {
		t.Errorf("the result does not say %q:\n%s", want, readFile(t, out))
	}
	for _, e := range jsonEvents(t, r.stdout) {
		if e["kind"] == "spawned" {
			t.Errorf("an agent was spawned: %v", e)
		}
	}
	if agentrecord.Read(record) != nil {
		t.Error("the agent started")
	}
}

func TestAnHTTPServerForAnAgentWithoutHTTPFailsNamingIt(t *testing.T) {
	const secret = "bearer-secret-3390"
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: nohttp
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with:
      agent: a
      prompt: hi
      mcp-servers:
        - {name: gh, command: gh-mcp, env: {T: %s}}
        - {name: docs, type: http, url: "https://docs.example/mcp", headers: {Authorization: "Bearer %s"}}
`, testAgent, agentArgs("-record", record, "-mcp-capabilities", "sse"), secret, secret))
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", state, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)
	want := `agent a does not support MCP servers over http (its initialize answer has no agentCapabilities.mcpCapabilities.http), so mcp-servers "docs" cannot be given to it`
	var res struct {
		Steps map[string]struct{ Error string }
	}
	json.Unmarshal([]byte(readFile(t, out)), &res)
	if got := res.Steps["s"].Error; !strings.HasPrefix(got, want) {
		t.Errorf("the step's error is\n%s\nwant it to start with\n%s", got, want)
	}
	if sessions := agentrecord.Named(record, "session_new"); len(sessions) != 0 {
		t.Errorf("session/new was sent: %v", sessions)
	}
	secretsAbsent(t, dir, state, runID(t, out), r, secret)
}

func TestSessionNewSendsAnEmptyListWithoutServers(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: none
agents:
  a: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs("-record", record)))
	if r := acpflow(t, dir, "run", wf, "--workspace", dir); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	sessions := agentrecord.Named(record, "session_new")
	if len(sessions) != 1 {
		t.Fatalf("%d session/new, want 1", len(sessions))
	}
	params, _ := sessions[0]["params"].(map[string]any)
	if list, ok := params["mcpServers"].([]any); !ok || len(list) != 0 {
		t.Errorf("mcpServers = %#v, want []", params["mcpServers"])
	}
	prompts := agentrecord.Named(record, "prompt")
	if len(prompts) != 1 {
		t.Fatalf("%d prompts, want 1", len(prompts))
	}
	if blocks, _ := prompts[0]["params"].(map[string]any)["prompt"].([]any); len(blocks) != 1 || agentrecord.PromptText(prompts[0]) != "hi" {
		t.Errorf("prompt = %v, want the one text block", prompts[0]["params"])
	}
}
