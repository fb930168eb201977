package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// usageResult is the part of a run's result about usage.
type usageResult struct {
	RunID  string         `json:"run_id"`
	Status string         `json:"status"`
	Error  string         `json:"error"`
	Usage  map[string]any `json:"usage"`
	Steps  map[string]struct {
		Status string         `json:"status"`
		Error  string         `json:"error"`
		Usage  map[string]any `json:"usage"`
	} `json:"steps"`
}

func readUsageResult(t *testing.T, path string) usageResult {
	t.Helper()
	var res usageResult
	if err := json.Unmarshal([]byte(readFile(t, path)), &res); err != nil {
		t.Fatalf("result: %v\n%s", err, readFile(t, path))
	}
	return res
}

func TestUsageReachesTheResultShowAndRunsAndNothingReportedIsUnknown(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	// counted reports 1,000 tokens and a cost of 0.25 USD per turn; next
	// continues its session (the agent then reports 0.50 cumulatively, of
	// which 0.25 is next's); silent reports nothing.
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: usage
agents:
  counting: {command: %s, args: %s}
  quiet: {command: %s, args: []}
steps:
  - {id: counted, uses: acp-subagent, with: {agent: counting, prompt: "a"}}
  - {id: next, needs: [counted], uses: acp-subagent, with: {agent: counting, prompt: "b", session: counted}}
  - {id: silent, uses: acp-subagent, with: {agent: quiet, prompt: "c"}}
`, testAgent, agentArgs("-usage-tokens", "1000", "-usage-cost", "0.25"), testAgent))
	r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := readUsageResult(t, out)
	want := map[string]any{"input_tokens": 750.0, "output_tokens": 250.0, "total_tokens": 1000.0,
		"cost": map[string]any{"amount": 0.25, "currency": "USD"}, "context_tokens": 1000.0, "context_size": 200000.0}
	if got := res.Steps["counted"].Usage; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counted's usage = %v, want %v", got, want)
	}
	want["context_tokens"] = 2000.0 // the context grew; the cost is next's own
	if got := res.Steps["next"].Usage; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("next's usage = %v, want %v (its own turn, not the session's total)", got, want)
	}
	if got := res.Steps["silent"].Usage; got != nil {
		t.Errorf("silent reported nothing, yet its usage is %v (want absent, never zeros)", got)
	}
	wantRun := map[string]any{"input_tokens": 1500.0, "output_tokens": 500.0, "total_tokens": 2000.0,
		"cost": map[string]any{"amount": 0.5, "currency": "USD"}, "unreported_steps": 1.0}
	if fmt.Sprint(res.Usage) != fmt.Sprint(wantRun) {
		t.Errorf("the run's usage = %v, want %v", res.Usage, wantRun)
	}
	if !strings.Contains(r.stdout, "[counted] succeeded in") || !strings.Contains(r.stdout, "(completed), 1,000 tokens, 0.25 USD") {
		t.Errorf("the plain view's step end line has no usage:\n%s", r.stdout)
	}

	show := acpflow(t, dir, "show", res.RunID, "--state", state)
	for _, line := range []string{
		"  usage:     2,000 tokens, 0.50 USD (+1 step(s) unknown)",
		"  usage: 1,000 tokens, 0.25 USD (in 750, out 250); context 2,000 of 200,000",
		"  usage: unknown",
	} {
		if !strings.Contains(show.stdout, line+"\n") {
			t.Errorf("show does not print %q:\n%s", line, show.stdout)
		}
	}
	showJSON := acpflow(t, dir, "show", res.RunID, "--state", state, "--json")
	var detail usageResult
	if err := json.Unmarshal([]byte(showJSON.stdout), &detail); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(detail.Usage) != fmt.Sprint(wantRun) || detail.Steps["silent"].Usage != nil || detail.Steps["counted"].Usage["total_tokens"] != 1000.0 {
		t.Errorf("show --json: run usage %v, counted %v, silent %v", detail.Usage, detail.Steps["counted"].Usage, detail.Steps["silent"].Usage)
	}
	runs := acpflow(t, dir, "runs", "--state", state)
	if !strings.Contains(runs.stdout, "USAGE") || !strings.Contains(runs.stdout, "2,000 tokens, 0.50 USD (+1 step(s) unknown)") {
		t.Errorf("runs has no usage column:\n%s", runs.stdout)
	}
}

func TestARunWithoutAnyUsageShowsUnknownNotZero(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: quiet
agents:
  a: {command: %s, args: []}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "x"}}
`, testAgent))
	if r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if raw := readFile(t, out); strings.Contains(raw, `"usage"`) {
		t.Errorf("a run whose agent reported nothing has a usage: %s", raw)
	}
	res := readUsageResult(t, out)
	show := acpflow(t, dir, "show", res.RunID, "--state", state)
	if !strings.Contains(show.stdout, "  usage:     unknown\n") || !strings.Contains(show.stdout, "  usage: unknown\n") {
		t.Errorf("show does not say unknown:\n%s", show.stdout)
	}
	runs := acpflow(t, dir, "runs", "--state", state)
	if !strings.Contains(runs.stdout, " unknown ") || strings.Contains(runs.stdout, " 0 tokens") {
		t.Errorf("runs does not say unknown:\n%s", runs.stdout)
	}
}

func TestARunBudgetExceededCancelsTheRunningStepAndStartsNothingMore(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	record := filepath.Join(dir, "record.jsonl")
	// spend reports 1,500 tokens while slow is still in its turn: the
	// budget of 1,000 is exceeded, slow is cancelled, after never starts.
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: budgeted
budget: {tokens: 1000}
agents:
  spender: {command: %s, args: %s}
  hanger: {command: %s, args: %s}
steps:
  - {id: spend, uses: acp-subagent, with: {agent: spender, prompt: "a"}}
  - {id: slow, uses: acp-subagent, with: {agent: hanger, prompt: "b"}}
  - {id: after, needs: [spend], uses: acp-subagent, with: {agent: spender, prompt: "c"}}
`, testAgent, agentArgs("-usage-tokens", "1500", "-prompt-delay", "300ms", "-record", record), testAgent, agentArgs("-prompt-hang", "-record", record)))
	r := acpflow(t, dir, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (budget exceeded)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := readUsageResult(t, out)
	const why = "budget exceeded: 1,500 tokens of 1,000"
	if res.Status != "failed" || res.Error != why {
		t.Errorf("run %s %q, want failed %q", res.Status, res.Error, why)
	}
	if st := res.Steps["spend"]; st.Status != "succeeded" {
		t.Errorf("spend %s %q, want succeeded (its turn was done)", st.Status, st.Error)
	}
	if st := res.Steps["slow"]; st.Status != "cancelled" || st.Error != why {
		t.Errorf("slow %s %q, want cancelled %q", st.Status, st.Error, why)
	}
	if st := res.Steps["after"]; st.Status != "skipped" || st.Error != "not started: "+why {
		t.Errorf("after %s %q, want skipped, not started: %s", st.Status, st.Error, why)
	}
	prompts := 0
	for _, rec := range readRecords(t, record) {
		if rec["event"] == "prompt" {
			prompts++
		}
	}
	if prompts != 2 {
		t.Errorf("%d prompts reached the agents, want 2 (after must not start)", prompts)
	}
	if !hasEvent(t, record, "cancel") {
		t.Error("slow's agent got no session/cancel")
	}
	assertAgentsGone(t, record)
	show := acpflow(t, dir, "show", res.RunID, "--state", state)
	if !strings.Contains(show.stdout, "error:     "+why) {
		t.Errorf("show does not say why:\n%s", show.stdout)
	}
}

func TestACostBudgetStopsATurnMidWayAndAnotherCurrencyIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name, currency, why string
	}{
		{"over", "USD", "budget exceeded: 0.75 USD of 0.50 USD"},
		{"another currency", "EUR", `budget: cost is limited in USD, but an agent reported a cost in "EUR", which cannot be counted against it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.jsonl")
			record := filepath.Join(dir, "record.jsonl")
			// The agent reports its cost as the turn begins, then hangs:
			// only the budget ends the turn.
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: costly
budget: {cost: {amount: 0.5, currency: USD}}
agents:
  a: {command: %s, args: %s}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "x"}}
`, testAgent, agentArgs("-usage-cost", "0.75", "-usage-currency", tc.currency, "-prompt-hang", "-record", record)))
			r := acpflow(t, dir, "run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
			if r.code != 1 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			res := readUsageResult(t, out)
			if res.Status != "failed" || res.Error != tc.why || res.Steps["s"].Status != "cancelled" {
				t.Errorf("run %s %q, step %s %q; want failed %q, cancelled", res.Status, res.Error, res.Steps["s"].Status, res.Steps["s"].Error, tc.why)
			}
			if c, _ := res.Steps["s"].Usage["cost"].(map[string]any); c["currency"] != tc.currency {
				t.Errorf("the cancelled step's usage %v does not keep the cost it reported", res.Steps["s"].Usage)
			}
			assertAgentsGone(t, record)
		})
	}
}

func TestABadBudgetIsRefusedWithItsPosition(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ budget, want string }{
		{"{tokens: 0}", "wf.yaml:2:18: budget: tokens: want a whole number of at least 1, got 0"},
		{"{tokens: many}", "budget: tokens: want a whole number of at least 1"},
		{"{cost: {amount: -1, currency: USD}}", "budget: cost: amount: want a number greater than 0, got -1"},
		{"{cost: {amount: 5}}", "budget: cost: missing currency"},
		{"{cost: {amount: 5, currency: dollars}}", `budget: cost: currency: want an ISO 4217 code such as USD, got "dollars"`},
		{"{tokns: 5}", `budget: unknown key "tokns"`},
		{"{}", "budget: set tokens, cost or both"},
	} {
		wf := writeWorkflow(t, dir, "name: b\nbudget: "+tc.budget+"\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: x}}\n")
		r := acpflow(t, dir, "validate", wf)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("budget: %s: exit %d\n%s\nwant %q", tc.budget, r.code, r.stderr, tc.want)
		}
	}
	os.Remove(filepath.Join(dir, "wf.yaml"))
}

func TestABatchBudgetStopsNewRunsAndResumeWithALargerOneRunsWhatIsLeft(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	record := filepath.Join(dir, "record.jsonl")
	// Each run reports 400 tokens. Lines 1 and 2 spend 800; line 3 takes
	// the batch to 1,200 while line 4 is still in its turn: the runs in
	// flight (3, still tearing its agent down, and 4, whose step is
	// cancelled) fail with the batch's error, as under a run timeout;
	// lines 5 and 6 never start.
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: many
inputs:
  delay: {type: string, required: true}
agents:
  a: {command: %s, args: ["-usage-tokens", "400", "-record", %q, "-prompt-delay", "${{ inputs.delay }}"]}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: "x"}}
`, testAgent, record))
	inputs := filepath.Join(dir, "inputs.jsonl")
	os.WriteFile(inputs, []byte(`{"delay": "10ms"}
{"delay": "10ms"}
{"delay": "200ms"}
{"delay": "3s"}
{"delay": "10ms"}
{"delay": "10ms"}
`), 0o644)
	r := acpflow(t, dir, "run", wf, "--inputs", inputs, "-c", "2", "--budget", "tokens=1000", "--state", state, "--output", out)
	const why = "batch budget exceeded: 1,200 tokens of 1,000"
	if r.code != 1 || !strings.Contains(r.stderr, why) {
		t.Fatalf("exit %d, want 1 saying %q\n%s\n%s", r.code, why, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, out)), "\n")
	statuses := map[string]int{}
	for _, l := range lines {
		var res usageResult
		json.Unmarshal([]byte(l), &res)
		statuses[res.Status]++
		if res.Status != "succeeded" && res.Error != why {
			t.Errorf("run %s %s says %q, want %q", res.RunID, res.Status, res.Error, why)
		}
		if res.Steps["s"].Status == "cancelled" {
			statuses["step cancelled"]++
		}
	}
	if len(lines) != 4 || statuses["succeeded"] < 2 || statuses["step cancelled"] != 1 {
		t.Errorf("results %v (%d lines), want lines 1-4, line 4's step cancelled: lines 5 and 6 must not start\n%s", statuses, len(lines), readFile(t, out))
	}
	assertAgentsGone(t, record)
	batchID := regexpBatchID.FindString(r.stderr)
	show := acpflow(t, dir, "show", batchID, "--state", state)
	for _, want := range []string{"budget: tokens=1000", "error: " + why, "usage: 1,200 tokens"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show %s does not say %q:\n%s", batchID, want, show.stdout)
		}
	}

	// Resumed under the same budget, the batch is spent already: nothing starts.
	r = acpflow(t, dir, "resume", batchID, "--state", state, "--output", out)
	if r.code != 1 || !strings.Contains(r.stderr, "batch budget exceeded: 1,200 tokens of 1,000") {
		t.Errorf("resume under the spent budget: exit %d\n%s", r.code, r.stderr)
	}
	if n := countLines(out); n != 4 {
		t.Errorf("resume under the spent budget ran %d runs", n-4)
	}
	r = acpflow(t, dir, "resume", batchID, "--budget", "tokens=100000", "--state", state, "--output", out)
	if r.code != 0 {
		t.Fatalf("resume with a larger budget: exit %d\n%s", r.code, r.stderr)
	}
	if n := countLines(out); n != 8 {
		t.Errorf("%d results after the resume, want 8 (lines 3 to 6 ran: 3 had failed with the batch)", n)
	}
	show = acpflow(t, dir, "show", batchID, "--state", state)
	if strings.Contains(show.stdout, "error:") || !strings.Contains(show.stdout, "budget: tokens=100000") {
		t.Errorf("show after the resume:\n%s", show.stdout)
	}
}

// regexpBatchID finds a batch id in acpflow's words.
var regexpBatchID = regexp.MustCompile(`b\d{8}T\d{6}-[0-9a-f]{8}`)

// Usage an agent reports that acpflow cannot count is dropped where it
// cannot be counted, with a warning that names the field, and the turn's
// result stands: the step succeeds with its output, and keeps the usage
// fields that can be counted. Classes of input covered, in the prompt
// response's usage: a fractional count, one of 1e300, ones beyond int64
// and uint64, one of 1e999 (no finite number), negative counts, strings
// ("NaN", "Infinity", "12"), null (unknown, unsaid), a usage that is no
// object; in a usage_update: a cost amount as a string, one of 1e308, a
// currency with an escape sequence, and a fractional `used` with a huge
// `size`; and, beside them, a step whose usage is good.
func TestUsageThatCannotBeCountedIsDroppedWithAWarningAndTheTurnStands(t *testing.T) {
	cases := []struct {
		id, flag, value string
		want            string // the step's usage as JSON; "" for absent
		warned          string // in the step's warning; "" for none
	}{
		{"fractional", "-usage-json", `{"inputTokens": 10, "outputTokens": 7.5, "totalTokens": 17}`, `{"input_tokens": 10, "total_tokens": 17}`, "usage.outputTokens 7.5 is not a whole number"},
		{"huge", "-usage-json", `{"inputTokens": 10, "outputTokens": 5, "totalTokens": 1e300}`, `{"input_tokens": 10, "output_tokens": 5}`, "usage.totalTokens 1e300 is more than 9007199254740991"},
		{"past_int64", "-usage-json", `{"inputTokens": 9223372036854775808, "outputTokens": 18446744073709551616, "totalTokens": 3}`, `{"total_tokens": 3}`, "usage.outputTokens 18446744073709551616 is more than"},
		{"infinite", "-usage-json", `{"inputTokens": 1, "outputTokens": 1, "totalTokens": 1e999}`, `{"input_tokens": 1, "output_tokens": 1}`, "usage.totalTokens 1e999 is not a finite number"},
		{"negative", "-usage-json", `{"inputTokens": -1, "outputTokens": 2, "totalTokens": 1}`, `{"output_tokens": 2, "total_tokens": 1}`, "usage.inputTokens -1 is negative"},
		{"strings", "-usage-json", `{"inputTokens": "NaN", "outputTokens": "Infinity", "totalTokens": "12"}`, ``, "usage.inputTokens is a string, not a number"},
		{"nulls", "-usage-json", `{"inputTokens": null, "outputTokens": null, "totalTokens": 4}`, `{"total_tokens": 4}`, ""},
		{"not_an_object", "-usage-json", `"lots"`, ``, "usage is a string, not an object"},
		{"amount_string", "-usage-update-json", `{"used": 100, "size": 1000, "cost": {"amount": "0.25", "currency": "USD"}}`, `{"context_tokens": 100, "context_size": 1000}`, "usage_update.cost.amount is a string, not a number"},
		{"amount_huge", "-usage-update-json", `{"cost": {"amount": 1e308, "currency": "USD"}}`, ``, "usage_update.cost.amount 1e308 is more than 1e+12"},
		{"currency_absurd", "-usage-update-json", `{"cost": {"amount": 0.25, "currency": "US\u001b[2JD"}}`, ``, "usage_update.cost.currency is not a currency code"},
		{"context_bad", "-usage-update-json", `{"used": 7.5, "size": 1e300}`, ``, "usage_update.size 1e300 is more than"},
		{"good", "-usage-tokens", "1000", `{"input_tokens": 750, "output_tokens": 250, "total_tokens": 1000}`, ""},
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	var wf strings.Builder
	wf.WriteString("name: usage\nagents:\n")
	for _, c := range cases {
		fmt.Fprintf(&wf, "  %s: {command: %s, args: %s}\n", c.id, testAgent, agentArgs("-record", record, c.flag, c.value))
	}
	wf.WriteString("steps:\n")
	for _, c := range cases {
		fmt.Fprintf(&wf, "  - {id: %s, uses: acp-subagent, with: {agent: %s, prompt: x}}\n", c.id, c.id)
	}
	path := writeWorkflow(t, dir, wf.String())
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", path, "--json", "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0: a usage that cannot be counted fails no step\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	warnings := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Type, Step, Kind, Message string
		}
		json.Unmarshal([]byte(line), &e)
		if e.Type == "step_update" && e.Kind == "warning" {
			warnings[e.Step] = append(warnings[e.Step], e.Message)
		}
	}
	var res struct {
		RunID string `json:"run_id"`
		Steps map[string]struct {
			Status     string          `json:"status"`
			StopReason string          `json:"stop_reason"`
			Output     string          `json:"output"`
			Usage      json.RawMessage `json:"usage"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		st := res.Steps[c.id]
		if st.Status != "succeeded" || st.StopReason != "completed" || st.Output != "Hello, world" {
			t.Errorf("%s: %s (%s) %q, want succeeded (completed) with the agent's answer", c.id, st.Status, st.StopReason, st.Output)
		}
		var got, want any
		json.Unmarshal(st.Usage, &got)
		if c.want != "" {
			json.Unmarshal([]byte(c.want), &want)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: usage %s, want %s", c.id, st.Usage, c.want)
		}
		said := strings.Join(warnings[c.id], "\n")
		switch {
		case c.warned == "" && said != "":
			t.Errorf("%s: warned %q of nothing wrong", c.id, said)
		case c.warned != "" && (len(warnings[c.id]) != 1 || !strings.Contains(said, c.warned)):
			t.Errorf("%s: warnings %q, want one saying %q", c.id, warnings[c.id], c.warned)
		}
		if strings.ContainsRune(said, 0x1b) {
			t.Errorf("%s: the warning holds the agent's escape: %q", c.id, said)
		}
	}
	assertAgentsGone(t, record)
	// The plain view says it too, and show and runs read the run.
	r = acpflow(t, dir, "run", path, "--state", state, "--workspace", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "[fractional] warning: usage the agent reported was dropped, as it cannot be counted: usage.outputTokens 7.5 is not a whole number") {
		t.Errorf("the plain view: exit %d\n%s", r.code, r.stdout)
	}
	if show := acpflow(t, dir, "show", res.RunID, "--state", state); show.code != 0 || !strings.Contains(show.stdout, "step fractional: succeeded") ||
		!strings.Contains(show.stdout, "  usage: 17 tokens (in 10)\n") {
		t.Errorf("show: exit %d\n%s", show.code, show.stdout)
	}
	assertAgentsGone(t, record)
}
