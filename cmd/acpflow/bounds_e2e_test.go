package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// boundsRun runs one test-agent step with args under the permission
// policy given, and returns the run, the step's result, how long acpflow
// took and the whole result file; rss is set to acpflow's peak RSS.
func boundsRun(t *testing.T, policy string, args ...string) (result, map[string]any, time.Duration, string) {
	r, step, took, all, _ := boundsRunMeasured(t, policy, args...)
	return r, step, took, all
}

func boundsRunMeasured(t *testing.T, policy string, args ...string) (r result, step map[string]any, took time.Duration, all string, rss int64) {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: bounds
agents:
  a: {command: %s, args: %s}
policies:
  permission: %s
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: go}
    timeout: 60s
`, testAgent, agentArgs(append([]string{"-record", record}, args...)...), policy))
	out := filepath.Join(dir, "out.json")
	began := time.Now()
	r, rss = runMeasured(t, dir, nil, "run", wf, "--output", out, "--workspace", dir, "--state", filepath.Join(dir, "state.db"))
	took = time.Since(began)
	assertAgentsGone(t, record)
	var run struct {
		Steps map[string]map[string]any `json:"steps"`
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result: %v\n%s", err, r.stderr)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	return r, run.Steps["s"], took, string(b), rss
}

// TestANonJSONLineMidTurnFailsTheRunAtOnce: through the binary, an agent
// that prints a line that is not JSON during its turn, then hangs, fails
// the run within seconds (its timeout is a minute), with an error that
// quotes the line escaped and scrubbed; the agent is gone after.
func TestANonJSONLineMidTurnFailsTheRunAtOnce(t *testing.T) {
	const secret = "sk-e2e-0123456789abcdef"
	t.Setenv("ACME_API_KEY", secret) // a credential of acpflow's environment: a secret
	for _, tc := range []struct {
		name, line, quoted string
	}{
		{"a traceback", "Traceback (most recent call last):", `"Traceback (most recent call last):"`},
		{"an escape and a secret", "\x1b]0;title\x07key " + secret, `"\x1b]0;title\akey [redacted]"`},
		{"a JSON array", `["not", "a", "message"]`, `"[\"not\", \"a\", \"message\"]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, step, took, all := boundsRun(t, "allow", "-stdout-line", tc.line, "-prompt-hang")
			if r.code != 1 || step["status"] != "failed" {
				t.Fatalf("exit %d, step %v\n%s", r.code, step["status"], r.stderr)
			}
			want := "agent a wrote a line that is not JSON on stdout during its turn: " + tc.quoted
			if msg, _ := step["error"].(string); !strings.Contains(msg, want) {
				t.Errorf("error %q\nwant it to quote %s", msg, tc.quoted)
			}
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("acpflow does not say why:\n%s%s", r.stdout, r.stderr)
			}
			if took > 20*time.Second {
				t.Errorf("the run took %s: the line did not end the turn, its timeout did", took)
			}
			if strings.Contains(all+r.stderr+r.stdout, secret) {
				t.Error("the secret is in the result or the output")
			}
		})
	}
	t.Run("a banner before initialize is no failure", func(t *testing.T) {
		r, step, _, _ := boundsRun(t, "allow", "-banner", "agent v1 starting", "-banner", "")
		if r.code != 0 || step["output"] != "Hello, world" {
			t.Errorf("exit %d, step %v\n%s", r.code, step, r.stderr)
		}
	})
}

// TestOversizedPermissionRequestsThroughTheBinary: a request past the
// bounds is refused and recorded so, one within them allowed, and the
// records keep a bounded part of what the agent sent, in bounded memory;
// the agent is gone after.
func TestOversizedPermissionRequestsThroughTheBinary(t *testing.T) {
	r, step, _, all, rss := boundsRunMeasured(t, "allow",
		"-permission-size", "title=200000", "-permission-size", "raw_input=8000000",
		"-permission-size", "locations=5000", "-permission-size", "command=1000", "-no-chunks")
	if r.code != 0 || step["status"] != "succeeded" {
		t.Fatalf("exit %d, step %v\n%s", r.code, step["status"], r.stderr)
	}
	out, _ := step["output"].(string)
	for _, want := range []string{
		"permission size title=200000: opt-reject-once\n",
		"permission size raw_input=8000000: opt-reject-once\n",
		"permission size locations=5000: opt-reject-once\n",
		"permission size command=1000: opt-allow-once\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	perms, _ := step["permissions"].([]any)
	tooLarge := 0
	for _, p := range perms {
		rec := p.(map[string]any)
		if rec["rule"] == "request-too-large" {
			tooLarge++
			if rec["decision"] != "reject" || !strings.Contains(fmt.Sprint(rec["reason"]), "a policy is shown: refused without asking the policy") {
				t.Errorf("record %.300v", rec)
			}
		}
	}
	if tooLarge != 3 || len(perms) != 4 {
		t.Errorf("%d records, %d of them request-too-large; want 4 and 3", len(perms), tooLarge)
	}
	// The records keep a bounded part of the 8 MB request, the 200 KB
	// title and the 5000 locations.
	if len(all) > 512<<10 {
		t.Errorf("the result is %d bytes", len(all))
	}
	// The 8 MB request is read, decoded and measured once; nothing of it
	// is kept.
	t.Logf("peak RSS %d MiB", rss>>20)
	if rss > 256<<20 {
		t.Errorf("peak RSS %d MiB", rss>>20)
	}
}

// TestAFloodOfRequestsWhileAPersonIsAskedIsRefusedPastTheCap: through the
// binary on a terminal, an agent that sends 40 requests at once under a
// policy that asks a person has the 24 past the cap (16) refused at once,
// while the person has answered nothing; the 16 are then asked one by
// one, and every answer is recorded.
func TestAFloodOfRequestsWhileAPersonIsAskedIsRefusedPastTheCap(t *testing.T) {
	const n, held = 40, 16
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: flood
agents:
  a: {command: %s, args: %s}
policies:
  permission: {default: ask, ask-fallback: reject}
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: go}
`, testAgent, agentArgs("-record", record, "-permission-flood", fmt.Sprint(n), "-no-chunks")))
	out := filepath.Join(dir, "result.json")
	answersBeforeAny := -1
	onTerminal(t, dir, func(_ string, q int) string {
		if q == 1 {
			// The refusals reach the agent while the person thinks (a
			// minute is a hang guard).
			deadline := time.Now().Add(time.Minute)
			for len(permissionAnswers(t, record)) < n-held && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			answersBeforeAny = len(permissionAnswers(t, record))
		}
		return "1" // allow once
	}, "run", wf, "--output", out, "--workspace", dir)
	assertAgentsGone(t, record)
	if answersBeforeAny != n-held {
		t.Errorf("%d requests answered before the person answered one, want the %d past the cap", answersBeforeAny, n-held)
	}
	status, perms := permissionsOf(t, out)
	byRule := map[string]int{}
	for _, p := range perms["s"] {
		byRule[fmt.Sprint(p["rule"], "/", p["ask"], "/", p["option_id"])]++
	}
	want := map[string]int{
		fmt.Sprint("too-many-requests/<nil>/opt-reject-once"): n - held,
		fmt.Sprint("default/person/opt-allow-once"):           held,
	}
	if status != "succeeded" || fmt.Sprint(byRule) != fmt.Sprint(want) {
		t.Errorf("status %s, records by rule/ask/option %v; want %v", status, byRule, want)
	}
}

// permissionAnswers are the answers the test agent has had.
func permissionAnswers(t *testing.T, record string) []map[string]any {
	var out []map[string]any
	for _, r := range readRecords(t, record) {
		if r["event"] == "permission_answer" {
			out = append(out, r)
		}
	}
	return out
}
