package main

// End to end: what acpflow records of a step's secrets (issue 23): the
// templated parts of MCP server urls, the paths of the run left alone,
// and the outer env policy judging what a workflow hands to MCP servers.
// The real binary, on workflow files, against the test agent.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// recordedURLs are the url of each MCP server in the session/new of a
// run's transcript (`show --transcript --json`), by server name.
func recordedURLs(t *testing.T, dir, state, runID string) map[string]string {
	t.Helper()
	r := acpflow(t, dir, "show", runID, "--transcript", "--json", "--state", state)
	if r.code != 0 {
		t.Fatalf("show --transcript: exit %d\n%s", r.code, r.stderr)
	}
	urls := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var l struct {
			Msg struct {
				Method string `json:"method"`
				Params struct {
					MCPServers []struct{ Name, URL string } `json:"mcpServers"`
				} `json:"params"`
			} `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg.Method == "session/new" {
			for _, s := range l.Msg.Params.MCPServers {
				urls[s.Name] = s.URL
			}
		}
	}
	return urls
}

// TestMCPServerURLsAreRecordedWithTheirTemplatedPartsHidden covers where a
// template sits in an MCP server's url (class: a query value, a short
// one, a path segment, userinfo, a fragment, the whole url, several
// templates; from env and from inputs; on the agent's and on the step's
// servers, http and sse): the agent gets the url as rendered; the
// transcript, the store, the results, the events and export show each
// templated part as [redacted], even where the agent repeats the url.
func TestMCPServerURLsAreRecordedWithTheirTemplatedPartsHidden(t *testing.T) {
	secrets := map[string]string{
		"E2E_MCP_Q":     "query-secret-4821",
		"E2E_MCP_SHORT": "k9", // too short to hunt down elsewhere, hidden in its url all the same
		"E2E_MCP_SEG":   "segment-secret-7730",
		"E2E_MCP_USER":  "mcp-user-1166",
		"E2E_MCP_PASS":  "mcp-password-3390",
		"E2E_MCP_FRAG":  "fragment-secret-5521",
		"E2E_MCP_WHOLE": "https://whole.example/mcp?token=whole-secret-9931",
		"E2E_MCP_A":     "multi-a-secret-2207",
		"E2E_MCP_B":     "multi-b-secret-6614",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	const inputSecret = "input-secret-8842"
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: urls
inputs:
  key: {type: string, required: true}
agents:
  a:
    command: %s
    args: %s
    mcp-servers:
      - {name: query, type: http, url: "https://mcp.example/sse?k=${{ env.E2E_MCP_Q }}"}
      - {name: short, type: sse, url: "https://mcp.example/sse?k=${{ env.E2E_MCP_SHORT }}&v=1"}
      - {name: segment, type: sse, url: "https://mcp.example/t/${{ env.E2E_MCP_SEG }}/sse"}
steps:
  - id: s
    uses: acp-subagent
    with:
      agent: a
      prompt: hi
      mcp-servers:
        - {name: userinfo, type: http, url: "https://${{ env.E2E_MCP_USER }}:${{ env.E2E_MCP_PASS }}@mcp.example/mcp"}
        - {name: fragment, type: http, url: "https://mcp.example/mcp#${{ env.E2E_MCP_FRAG }}"}
        - {name: whole, type: http, url: "${{ env.E2E_MCP_WHOLE }}"}
        - {name: several, type: sse, url: "https://mcp.example/${{ env.E2E_MCP_A }}/sse?a=${{ env.E2E_MCP_B }}&k=${{ inputs.key }}"}
        - {name: literal, type: http, url: "https://docs.example/mcp?page=1"}
`, testAgent, agentArgs("-record", record, "-echo-request", "-no-chunks", "-mcp-capabilities", "http,sse")))
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--input", "key="+inputSecret, "--json", "--output", out, "--state", state, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAgentsGone(t, record)
	id := runID(t, out)

	sent := map[string]string{
		"query":    "https://mcp.example/sse?k=" + secrets["E2E_MCP_Q"],
		"short":    "https://mcp.example/sse?k=k9&v=1",
		"segment":  "https://mcp.example/t/" + secrets["E2E_MCP_SEG"] + "/sse",
		"userinfo": "https://" + secrets["E2E_MCP_USER"] + ":" + secrets["E2E_MCP_PASS"] + "@mcp.example/mcp",
		"fragment": "https://mcp.example/mcp#" + secrets["E2E_MCP_FRAG"],
		"whole":    secrets["E2E_MCP_WHOLE"],
		"several":  "https://mcp.example/" + secrets["E2E_MCP_A"] + "/sse?a=" + secrets["E2E_MCP_B"] + "&k=" + inputSecret,
		"literal":  "https://docs.example/mcp?page=1",
	}
	shown := map[string]string{
		"query":    "https://mcp.example/sse?k=[redacted]",
		"short":    "https://mcp.example/sse?k=[redacted]&v=1",
		"segment":  "https://mcp.example/t/[redacted]/sse",
		"userinfo": "https://[redacted]:[redacted]@mcp.example/mcp",
		"fragment": "https://mcp.example/mcp#[redacted]",
		"whole":    "[redacted]",
		"several":  "https://mcp.example/[redacted]/sse?a=[redacted]&k=[redacted]",
		"literal":  "https://docs.example/mcp?page=1",
	}

	// The agent got every url as rendered (its own record, a file of the
	// test's).
	sessions := agentrecord.Named(record, "session_new")
	if len(sessions) != 1 {
		t.Fatalf("%d session/new, want 1", len(sessions))
	}
	b, _ := json.Marshal(sessions[0]["params"])
	var got struct {
		MCPServers []struct{ Name, URL string } `json:"mcpServers"`
	}
	json.Unmarshal(b, &got)
	if len(got.MCPServers) != len(sent) {
		t.Fatalf("the agent got %d servers, want %d: %s", len(got.MCPServers), len(sent), b)
	}
	for _, s := range got.MCPServers {
		if s.URL != sent[s.Name] {
			t.Errorf("the agent got %s's url %q, want %q", s.Name, s.URL, sent[s.Name])
		}
	}

	// The transcript shows each url with its templated parts hidden.
	urls := recordedURLs(t, dir, state, id)
	for name, want := range shown {
		if urls[name] != want {
			t.Errorf("the transcript has %s's url %q, want %q", name, urls[name], want)
		}
	}
	// The agent repeated the urls in its answer (-echo-request): the
	// output, its events and the store show them hidden too.
	var res struct {
		Steps map[string]struct{ Output string }
	}
	json.Unmarshal([]byte(readFile(t, out)), &res)
	if o := res.Steps["s"].Output; !strings.Contains(o, `"url":"https://[redacted]:[redacted]@mcp.example/mcp"`) || !strings.Contains(o, `"url":"[redacted]"`) {
		t.Errorf("the step's output does not show the urls hidden:\n%s", o)
	}
	exported := acpflow(t, dir, "export", id, "--state", state)
	if exported.code != 0 {
		t.Fatalf("export: exit %d\n%s", exported.code, exported.stderr)
	}
	if !strings.Contains(exported.stdout, shown["segment"]) {
		t.Errorf("the exported file lacks the url %s", shown["segment"])
	}
	hidden := []string{inputSecret}
	for k, v := range secrets {
		if k != "E2E_MCP_SHORT" {
			hidden = append(hidden, v)
		}
	}
	for _, v := range append(hidden, sent["short"]) {
		if strings.Contains(exported.stdout, v) {
			t.Errorf("the exported file carries %q", v)
		}
	}
	// The input is recorded as given (resume needs it): every place but
	// the run's inputs.
	for _, e := range jsonEvents(t, r.stdout) {
		if e["type"] == "run_start" {
			continue
		}
		line, _ := json.Marshal(e)
		if strings.Contains(string(line), inputSecret) {
			t.Errorf("an event carries the input's value: %s", line)
		}
	}
	secretsAbsent(t, dir, state, id, r, append(hidden[1:], sent["short"])...)
}

// TestAnAgentRepeatingAURLInAFailureIsRecordedHidden covers the error
// path (class: a step that fails on its MCP servers, with the url in the
// agent's stderr and in acpflow's error): the step's error, its stderr
// tail and the events hold the url with its secret hidden.
func TestAnAgentRepeatingAURLInAFailureIsRecordedHidden(t *testing.T) {
	const secret = "failing-url-secret-4410"
	t.Setenv("E2E_MCP_FAIL", secret)
	for _, tc := range []struct {
		name, flags, want string
		stderr            bool // the agent's stderr is surely in the error: it exited
	}{
		{"the agent crashes on session/new, saying the url", "-crash-on,session/new,-mcp-capabilities,sse", "during session/new", true},
		{"the agent takes no sse servers", "-mcp-capabilities,http", `so mcp-servers "events" cannot be given to it`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			record := filepath.Join(dir, "record.jsonl")
			args := append([]string{"-record", record, "-stderr", "cannot reach https://mcp.example/sse?k=" + secret}, strings.Split(tc.flags, ",")...)
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: failing
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with:
      agent: a
      prompt: hi
      mcp-servers: [{name: events, type: sse, url: "https://mcp.example/sse?k=${{ env.E2E_MCP_FAIL }}"}]
`, testAgent, agentArgs(args...)))
			state := filepath.Join(dir, "state.db")
			out := filepath.Join(dir, "out.jsonl")
			r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", state, "--workspace", dir)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			assertAgentsGone(t, record)
			var res struct {
				Steps map[string]struct{ Error string }
			}
			json.Unmarshal([]byte(readFile(t, out)), &res)
			e := res.Steps["s"].Error
			if !strings.Contains(e, tc.want) || tc.stderr && !strings.Contains(e, "cannot reach https://mcp.example/sse?k=[redacted]") {
				t.Errorf("the step's error is\n%s\nwant it to say %q (and the agent's stderr with the url hidden: %v)", e, tc.want, tc.stderr)
			}
			secretsAbsent(t, dir, state, runID(t, out), r, secret)
		})
	}
}

// TestRedactionLeavesThePathsOfTheRunAlone covers ambient and explicit
// values related to the paths acpflow records (class: a parent of the
// workspace in OLDPWD, the workspace itself, a path below it, the step's
// cwd, dropped by inherit: core or none or by a rule, or set explicitly;
// and a path to a credential file under a credential's name), beside a
// credential that is still hidden: the transcript keeps every path, and
// `policy test` with the run's own policy, over the store and over the
// exported file, changes no decision.
func TestRedactionLeavesThePathsOfTheRunAlone(t *testing.T) {
	const credential = "tok-e2e-credential-5521"
	for _, inherit := range []string{"core", "none"} {
		t.Run("inherit "+inherit, func(t *testing.T) {
			dir := t.TempDir()
			ws := filepath.Join(dir, "work", "project")
			if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("OLDPWD", filepath.Dir(ws))
			t.Setenv("E2E_PROJECT_DIR", ws)
			t.Setenv("E2E_SUB_DIR", filepath.Join(ws, "sub"))
			t.Setenv("E2E_NOTES", filepath.Join(ws, "sub", "notes.md"))
			t.Setenv("E2E_API_TOKEN", credential)
			creds := filepath.Join(dir, "creds.json") // outside the workspace
			t.Setenv("E2E_CREDENTIALS_FILE", creds)
			record := filepath.Join(dir, "record.jsonl")
			notes := filepath.Join(ws, "sub", "notes.md")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: paths
agents:
  a:
    command: %s
    args: %s
    cwd: sub
    env: {WORKDIR: "${{ run.workspace }}"}
policies:
  env:
    inherit: %s
    rules:
      - {if: 'name == "E2E_SUB_DIR"', then: drop}
  permission:
    rules:
      - {if: 'tool.kind in ["edit", "read"] && all(tool.locations, .in_workspace)', then: allow}
    default: reject
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "edit ${{ run.workspace }}/sub/notes.md"}}
`, testAgent, agentArgs("-record", record, "-permission", "edit:"+notes, "-permission", "execute:echo "+credential, "-permission", "read:"+creds), inherit))
			state := filepath.Join(dir, "state.db")
			out := filepath.Join(dir, "out.jsonl")
			r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", state, "--workspace", ws)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			assertAgentsGone(t, record)
			id := runID(t, out)
			output, perms := stepPermissions(t, out)
			if len(perms) != 3 || perms[0]["decision"] != "allow" || perms[1]["decision"] != "reject" || perms[2]["decision"] != "reject" {
				t.Fatalf("permissions %v, want the edit allowed, the command and the read outside rejected", perms)
			}
			if !strings.Contains(output, "permission edit "+notes+": opt-allow-once") {
				t.Errorf("the output lost the path:\n%s", output)
			}

			tr := acpflow(t, dir, "show", id, "--transcript", "--json", "--state", state)
			if tr.code != 0 {
				t.Fatalf("show --transcript: exit %d\n%s", tr.code, tr.stderr)
			}
			if strings.Contains(tr.stdout, "[redacted]/") || strings.Contains(tr.stdout, "[redacted]"+string(filepath.Separator)) {
				t.Errorf("the transcript has a path redacted:\n%s", tr.stdout)
			}
			for _, want := range []string{`"cwd":"` + filepath.Join(ws, "sub") + `"`, `"path":"` + notes + `"`, `"path":"` + creds + `"`, "echo [redacted]"} {
				if !strings.Contains(tr.stdout, want) {
					t.Errorf("the transcript lacks %s:\n%s", want, tr.stdout)
				}
			}

			// The run's own policy changes nothing, read from the store or
			// from the exported file.
			pt := acpflow(t, dir, "policy", "test", wf, "--runs", id, "--state", state)
			if pt.code != 0 || !strings.Contains(pt.stdout, "3 requests in 1 run: 0 changed, 3 unchanged") {
				t.Errorf("policy test --runs: exit %d, want 0 and nothing changed\n%s%s", pt.code, pt.stdout, pt.stderr)
			}
			exported := acpflow(t, dir, "export", id, "--state", state)
			if exported.code != 0 {
				t.Fatalf("export: exit %d\n%s", exported.code, exported.stderr)
			}
			file := filepath.Join(dir, "run.transcript.json")
			if err := os.WriteFile(file, []byte(exported.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			pt = acpflow(t, ws, "policy", "test", wf, "--transcripts", file)
			if pt.code != 0 || !strings.Contains(pt.stdout, "0 changed") {
				t.Errorf("policy test --transcripts: exit %d, want 0 and nothing changed\n%s%s", pt.code, pt.stdout, pt.stderr)
			}
			secretsAbsent(t, dir, state, id, r, credential)
		})
	}
}

// outerMCPPolicy drops every AWS_ variable by name, and any value that
// holds an AWS access key id.
const outerMCPPolicy = `env:
  scrub-credentials: false
  rules:
    - {if: 'name startsWith "AWS_"', then: drop}
    - {if: 'value contains "AKIA"', then: drop}
`

// TestAnOuterEnvRuleHoldsForWhatAWorkflowHandsToMCPServers covers the
// values that reach the agent's side besides its env (class: a stdio
// server's env, an http or sse server's headers; the agent's servers and
// the step's; refused by name or by value): a value the outer policy
// drops fails the step before anything is spawned, naming the variable
// and the server, never the value; what it admits reaches the agent.
func TestAnOuterEnvRuleHoldsForWhatAWorkflowHandsToMCPServers(t *testing.T) {
	const (
		awsSecret = "aws-mcp-secret-7431"
		keyID     = "AKIA-mcp-secret-2290"
	)
	t.Setenv("E2E_AWS", awsSecret)
	t.Setenv("E2E_KEY_ID", keyID)
	for _, tc := range []struct {
		name, agentServers, stepServers, want string
	}{
		{"the agent's stdio server's env, by name",
			`[{name: gh, command: gh-mcp, env: {AWS_SECRET_ACCESS_KEY: "${{ env.E2E_AWS }}"}}]`, "[]",
			"refuses AWS_SECRET_ACCESS_KEY set by agent a's mcp-servers.gh.env (rule 1); nothing was spawned"},
		{"the step's stdio server's env, by value under another name",
			"[]", `[{name: tools, command: tools-mcp, env: {TOOLS_ID: "${{ env.E2E_KEY_ID }}"}}]`,
			"refuses TOOLS_ID set by step s's mcp-servers.tools.env (rule 2); nothing was spawned"},
		{"the step's http server's header, by value",
			"[]", `[{name: docs, type: http, url: "https://docs.example/mcp", headers: {Authorization: "Bearer ${{ env.E2E_KEY_ID }}"}}]`,
			"refuses Authorization set by step s's mcp-servers.docs.headers (rule 2); nothing was spawned"},
		{"the agent's sse server's header, by name",
			`[{name: events, type: sse, url: "https://events.example/sse", headers: {AWS_TOKEN: "${{ env.E2E_AWS }}"}}]`, "[]",
			"refuses AWS_TOKEN set by agent a's mcp-servers.events.headers (rule 1); nothing was spawned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			outer := writeFile(t, dir, "org.yaml", outerMCPPolicy)
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: mcp
agents:
  a: {command: %s, args: %s, mcp-servers: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi, mcp-servers: %s}}
`, testAgent, agentArgs("-record", record, "-mcp-capabilities", "http,sse"), tc.agentServers, tc.stepServers))

			// Without the outer policy the run goes.
			if r := acpflow(t, dir, "run", wf, "--workspace", dir); r.code != 0 {
				t.Fatalf("without the outer policy: exit %d\n%s", r.code, r.stderr)
			}
			assertAgentsGone(t, record)
			os.Remove(record)

			state := filepath.Join(dir, "state.db")
			out := filepath.Join(dir, "out.jsonl")
			r := acpflow(t, dir, "run", wf, "--policy", outer, "--json", "--output", out, "--state", state, "--workspace", dir)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			if readRecords(t, record) != nil {
				t.Error("the agent was spawned")
			}
			var res struct {
				Steps map[string]struct{ Status, Error string }
			}
			json.Unmarshal([]byte(readFile(t, out)), &res)
			want := fmt.Sprintf("outer policy (%s) %s", outer, tc.want)
			if s := res.Steps["s"]; s.Status != "failed" || s.Error != want {
				t.Errorf("step %s: %q\nwant failed: %q", s.Status, s.Error, want)
			}
			secretsAbsent(t, dir, state, runID(t, out), r, awsSecret, keyID)
		})
	}

	t.Run("what the outer policy admits reaches the agent", func(t *testing.T) {
		dir := t.TempDir()
		outer := writeFile(t, dir, "org.yaml", outerMCPPolicy)
		record := filepath.Join(dir, "record.jsonl")
		wf := writeWorkflow(t, dir, fmt.Sprintf(`name: mcp
agents:
  a: {command: %s, args: %s}
steps:
  - id: s
    uses: acp-subagent
    with:
      agent: a
      prompt: hi
      mcp-servers:
        - {name: gh, command: gh-mcp, env: {GITHUB_TOKEN: "${{ env.E2E_AWS }}-not-aws"}}
        - {name: docs, type: http, url: "https://docs.example/mcp", headers: {X-Api-Key: plain-key-value}}
`, testAgent, agentArgs("-record", record, "-mcp-capabilities", "http")))
		if r := acpflow(t, dir, "run", wf, "--policy", outer, "--workspace", dir); r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		assertAgentsGone(t, record)
		sessions := agentrecord.Named(record, "session_new")
		if len(sessions) != 1 {
			t.Fatalf("%d session/new, want 1", len(sessions))
		}
		sent, _ := json.Marshal(sessions[0]["params"])
		for _, v := range []string{`"value":"` + awsSecret + `-not-aws"`, `"value":"plain-key-value"`} {
			if !strings.Contains(string(sent), v) {
				t.Errorf("session/new lacks %s:\n%s", v, sent)
			}
		}
	})
}
