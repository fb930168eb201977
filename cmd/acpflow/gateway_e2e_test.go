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

// scriptedProvider is an Anthropic Messages server on loopback that logs
// the key each request carried and answers from a script: each answer in
// turn, the last one again for every later request.
type scriptedProvider struct {
	*httptest.Server
	mu   sync.Mutex
	keys []string
}

type providerAnswer struct {
	status int
	body   string
}

// messagesAnswer is a whole Messages answer saying text, with its usage.
func messagesAnswer(text string, in, out int) providerAnswer {
	return providerAnswer{200, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",`+
		`"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`, text, in, out)}
}

func startProvider(t *testing.T, script ...providerAnswer) *scriptedProvider {
	t.Helper()
	p := &scriptedProvider{}
	n := 0
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.keys = append(p.keys, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		a := script[min(n, len(script)-1)]
		n++
		p.mu.Unlock()
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
	}))
	t.Cleanup(p.Close)
	return p
}

// received is the credentials of every request the provider got.
func (p *scriptedProvider) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.keys...)
}

// gatewayWorkflow is a workflow whose one step's agent (the test agent,
// which calls its model as claude does) goes through a gateway to
// upstream, with the key from $GW_TEST_KEY; extra is more of the
// workflow's top level.
func gatewayWorkflow(t *testing.T, dir, upstream, extra string, args ...string) string {
	return writeWorkflow(t, dir, fmt.Sprintf(`name: gw
%sagents:
  model-caller:
    command: %s
    args: %s
    env: {ANTHROPIC_API_KEY: "${{ env.GW_TEST_KEY }}"}
    gateway:
      key: ${{ env.GW_TEST_KEY }}
      upstream: %s
      api: anthropic
      base-url-env: ANTHROPIC_BASE_URL
      key-env: ANTHROPIC_API_KEY
steps:
  - {id: ask, uses: acp-subagent, with: {agent: model-caller, prompt: "hi"}}
`, extra, testAgent, agentArgs(args...), upstream))
}

func TestTheGatewayKeepsTheKeyFromTheAgentAndMetersWhatTheProviderSaid(t *testing.T) {
	dir := t.TempDir()
	state, out, rec := filepath.Join(dir, "state.db"), filepath.Join(dir, "out.json"), filepath.Join(dir, "rec.jsonl")
	key := "sk-canary-" + rand.Text()
	prov := startProvider(t, messagesAnswer("The provider's own answer, unchanged: «ü» \\n", 120, 30))
	// The agent claims a usage of its own, which the gateway's replaces.
	wf := gatewayWorkflow(t, dir, prov.URL, "", "-no-chunks", "-call-model", "2", "-usage-tokens", "999999", "-record", rec)
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": key}, nil, "run", wf, "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for i, got := range prov.received() {
		if got != key+"|" {
			t.Errorf("request %d reached the provider with x-api-key|authorization %q, want the key alone", i, strings.ReplaceAll(got, key, "KEY"))
		}
	}
	if n := len(prov.received()); n != 2 {
		t.Errorf("the provider got %d requests, want 2", n)
	}
	assertAgentsGone(t, rec)
	for _, ev := range readRecords(t, rec) {
		if ev["event"] != "start" {
			continue
		}
		env := ev["env"].(map[string]any)
		for k, v := range env {
			if strings.Contains(fmt.Sprint(v), key) {
				t.Errorf("the agent's %s holds the key", k)
			}
		}
		if v := fmt.Sprint(env["ANTHROPIC_API_KEY"]); !strings.HasPrefix(v, "acpflow-placeholder-") {
			t.Errorf("the agent's ANTHROPIC_API_KEY is %q, want the placeholder", v)
		}
		if v := fmt.Sprint(env["ANTHROPIC_BASE_URL"]); !strings.HasPrefix(v, "http://127.0.0.1:") {
			t.Errorf("the agent's ANTHROPIC_BASE_URL is %q, want the gateway's", v)
		}
	}
	res := readUsageResult(t, out)
	step := res.Steps["ask"]
	u := step.Usage
	if u["source"] != "gateway" || u["input_tokens"] != 240.0 || u["output_tokens"] != 60.0 || u["total_tokens"] != 300.0 {
		t.Errorf("usage = %v, want the provider's 240 in, 60 out, 300 total, source gateway (not the agent's 999999)", u)
	}
	if models, _ := u["models"].(map[string]any); models["claude-sonnet-4-5"] == nil {
		t.Errorf("usage has no models.claude-sonnet-4-5: %v", u)
	}
	// 240 × 3 + 60 × 15 per million.
	if c, _ := u["cost"].(map[string]any); c["amount"] != 0.00162 || c["currency"] != "USD" {
		t.Errorf("usage cost = %v, want 0.00162 USD from the price table", u["cost"])
	}
	outText := readFile(t, out)
	if !strings.Contains(outText, `The provider's own answer, unchanged: «ü» \\n`) {
		t.Errorf("the answer did not arrive unchanged:\n%s", outText)
	}
	show := acpflow(t, dir, "show", res.RunID, "--state", state)
	if !strings.Contains(show.stdout, "300 tokens") || !strings.Contains(show.stdout, "gateway") {
		t.Errorf("show does not give the gateway's usage:\n%s", show.stdout)
	}
	events := acpflow(t, dir, "show", res.RunID, "--state", state, "--json")
	for what, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "result": outText,
		"show": show.stdout, "show --json": events.stdout, "store": readFile(t, state) + storeWAL(state)} {
		if strings.Contains(text, key) {
			t.Errorf("the key is in the %s", what)
		}
	}
}

func TestTheGatewayNamesTheProvidersRefusalInTheStepsError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer providerAnswer
		want   string
	}{
		{"rate limit", providerAnswer{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`},
			"the provider refused: rate limit (429): rate_limit_error: Number of requests has exceeded your rate limit"},
		{"bad key", providerAnswer{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
			"the provider refused: authentication (401): authentication_error: invalid x-api-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, rec := filepath.Join(dir, "out.json"), filepath.Join(dir, "rec.jsonl")
			prov := startProvider(t, tc.answer)
			wf := gatewayWorkflow(t, dir, prov.URL, "", "-no-chunks", "-call-model", "1", "-record", rec)
			r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": "sk-test-" + rand.Text()}, nil,
				"run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1 (the turn ended with an apology, not an answer)\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			res := readUsageResult(t, out)
			if st := res.Steps["ask"]; st.Status != "failed" || !strings.Contains(st.Error, tc.want) {
				t.Errorf("step %s: %q, want failed with %q", st.Status, st.Error, tc.want)
			}
			assertAgentsGone(t, rec)
		})
	}
}

func TestARunsBudgetStopsTheModelRequestsAtTheGateway(t *testing.T) {
	dir := t.TempDir()
	out, rec := filepath.Join(dir, "out.json"), filepath.Join(dir, "rec.jsonl")
	prov := startProvider(t, messagesAnswer("spent", 120, 30))
	// The first request spends the whole budget; the second must not
	// reach the provider.
	wf := gatewayWorkflow(t, dir, prov.URL, "budget: {tokens: 150}\n", "-no-chunks", "-call-model", "3", "-record", rec)
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": "sk-test-" + rand.Text()}, nil,
		"run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(prov.received()); n != 1 {
		t.Errorf("the provider got %d requests, want 1: the budget was spent by the first\n%s", n, readFile(t, out))
	}
	res := readUsageResult(t, out)
	if st := res.Steps["ask"]; st.Status != "failed" || !strings.Contains(st.Error, "budget reached: 150 tokens of 150") {
		t.Errorf("step %s: %q, want failed saying the budget was reached", st.Status, st.Error)
	}
	calls := 0
	for _, ev := range readRecords(t, rec) {
		if ev["event"] == "model_call" {
			calls++
			if calls > 1 && ev["status"] != 429.0 {
				t.Errorf("model call %d got %v, want the gateway's 429", calls, ev["status"])
			}
		}
	}
	assertAgentsGone(t, rec)
}

func TestAGatewayWithoutItsKeyFailsBeforeTheSpawn(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	wf := gatewayWorkflow(t, dir, "https://api.anthropic.com", "", "-record", rec)
	r := acpflowEnv(t, dir, nil, []string{"GW_TEST_KEY"}, "run", wf, "--state", filepath.Join(dir, "state.db"), "--workspace", dir)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "agents.model-caller.gateway.key: no provider key") {
		t.Errorf("exit %d, want 1 naming the missing key\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(rec); err == nil {
		t.Errorf("the agent was started without a key")
	}
}

// The claude preset wires the gateway itself: `gateway:` at the workflow's
// top with the key from acpflow's ANTHROPIC_API_KEY; the agent gets the
// placeholder in ANTHROPIC_API_KEY, the gateway in ANTHROPIC_BASE_URL, and
// no ANTHROPIC_AUTH_TOKEN at all, whatever the env policy would pass.
func TestThePresetPointsItsAgentAtTheGateway(t *testing.T) {
	dir := t.TempDir()
	rec, out := filepath.Join(dir, "rec.jsonl"), filepath.Join(dir, "out.json")
	key, token := "sk-canary-"+rand.Text(), "oauth-canary-"+rand.Text()
	prov := startProvider(t, messagesAnswer("claude's answer", 10, 5))
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: gw
policies: {env: {inherit: all}}
gateway: {upstream: %s}
agents:
  claude:
    preset: claude
    command: %s
    args: %s
steps:
  - {id: ask, uses: acp-subagent, with: {agent: claude, prompt: "hi"}}
`, prov.URL, testAgent, agentArgs("-modes", "default", "-no-chunks", "-call-model", "1", "-record", rec)))
	r := acpflowEnv(t, dir, map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_AUTH_TOKEN": token}, nil,
		"run", wf, "--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := prov.received(); len(got) != 1 || got[0] != key+"|" {
		t.Errorf("the provider got %d requests, the first without the key alone", len(got))
	}
	for _, ev := range readRecords(t, rec) {
		if ev["event"] != "start" {
			continue
		}
		env := ev["env"].(map[string]any)
		for k, v := range env {
			if s := fmt.Sprint(v); strings.Contains(s, key) || strings.Contains(s, token) {
				t.Errorf("the agent's %s holds a credential of acpflow's", k)
			}
		}
		if _, ok := env["ANTHROPIC_AUTH_TOKEN"]; ok {
			t.Errorf("the agent got ANTHROPIC_AUTH_TOKEN")
		}
		if !strings.HasPrefix(fmt.Sprint(env["ANTHROPIC_API_KEY"]), "acpflow-placeholder-") {
			t.Errorf("the agent's ANTHROPIC_API_KEY is not the placeholder")
		}
	}
	if !strings.Contains(readFile(t, out), "claude's answer") {
		t.Errorf("no answer in the result:\n%s", readFile(t, out))
	}
	assertAgentsGone(t, rec)
}

// A reused agent keeps its gateway for its life: the second step takes the
// same process, its requests still carry the key to the provider, and
// each step's usage is its own turn's.
func TestAReusedAgentKeepsItsGatewayAndEachStepCountsItsOwnTurn(t *testing.T) {
	dir := t.TempDir()
	rec, out := filepath.Join(dir, "rec.jsonl"), filepath.Join(dir, "out.json")
	key := "sk-canary-" + rand.Text()
	prov := startProvider(t, messagesAnswer("again", 100, 20))
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: gw
agents:
  model-caller:
    command: %s
    args: %s
    reuse: true
    gateway: {key: "${{ env.GW_TEST_KEY }}", upstream: %s, api: anthropic, base-url-env: ANTHROPIC_BASE_URL, key-env: ANTHROPIC_API_KEY, record: true}
steps:
  - {id: one, uses: acp-subagent, with: {agent: model-caller, prompt: "a"}}
  - {id: two, uses: acp-subagent, needs: [one], with: {agent: model-caller, prompt: "b"}}
`, testAgent, agentArgs("-no-chunks", "-call-model", "1", "-record", rec), prov.URL))
	state := filepath.Join(dir, "state.db")
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": key}, nil, "run", wf, "--json", "--state", state, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	starts := 0
	for _, ev := range readRecords(t, rec) {
		if ev["event"] == "start" {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("the agent started %d times, want once (reused)", starts)
	}
	if got := prov.received(); len(got) != 2 || got[0] != key+"|" || got[1] != key+"|" {
		t.Errorf("the provider got %d requests, not each with the key alone", len(got))
	}
	res := readUsageResult(t, out)
	for _, id := range []string{"one", "two"} {
		if u := res.Steps[id].Usage; u["total_tokens"] != 120.0 || u["source"] != "gateway" {
			t.Errorf("%s's usage = %v, want its own turn's 120 tokens from the gateway", id, u)
		}
	}
	// record: true keeps each exchange's bodies in the run's events, keys
	// removed.
	events := r.stdout
	var exchanges []map[string]any
	for _, line := range strings.Split(events, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["kind"] == "gateway_exchange" {
			exchanges = append(exchanges, ev)
		}
	}
	if len(exchanges) != 2 {
		t.Fatalf("%d gateway_exchange events, want 2:\n%s", len(exchanges), events)
	}
	for i, x := range exchanges {
		if req := fmt.Sprint(x["request"]); !strings.Contains(req, fmt.Sprintf("turn %d call 1", i+1)) || !strings.Contains(fmt.Sprint(x["response"]), `"text":"again"`) {
			t.Errorf("exchange %d does not hold its bodies: %v", i+1, x)
		}
	}
	if strings.Contains(events, key) || strings.Contains(readFile(t, state)+storeWAL(state), key) {
		t.Errorf("the key is in the run's events or store")
	}
	assertAgentsGone(t, rec)
}

// A batch's budget (run --budget) is enforced at the gateway too: once
// the first run has spent it, the next runs' model requests never reach
// the provider, and their steps fail saying so.
func TestABatchsBudgetStopsTheNextRunsRequestsAtTheGateway(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	inputs := filepath.Join(dir, "inputs.jsonl")
	if err := os.WriteFile(inputs, []byte("{}\n{}\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prov := startProvider(t, messagesAnswer("spent", 120, 30))
	wf := gatewayWorkflow(t, dir, prov.URL, "", "-no-chunks", "-call-model", "1")
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": "sk-test-" + rand.Text()}, nil,
		"run", wf, "--inputs", inputs, "--concurrency", "1", "--budget", "tokens=150",
		"--state", filepath.Join(dir, "state.db"), "--output", out, "--workspace", dir)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(prov.received()); n != 1 {
		t.Errorf("the provider got %d requests, want 1: the batch's budget was spent by the first run", n)
	}
	if got := readFile(t, out); strings.Count(got, "budget reached: the model gateway refused") != 2 || !strings.Contains(got, "batch budget reached: 150 tokens of 150") {
		t.Errorf("want the two later runs failed saying the batch's budget was reached:\n%s", got)
	}
}

// storeWAL is the store's write-ahead log, where its latest rows may still
// be ("" when there is none).
func storeWAL(state string) string {
	b, _ := os.ReadFile(state + "-wal")
	return string(b)
}

// Under sandbox: {network: gateway} the agent's only way out is its
// gateway: its model calls still reach the provider with the key, and
// the step's sandbox says what was enforced.
func TestAnAgentSandboxedToItsGatewayStillReachesItsModel(t *testing.T) {
	skipWithoutSandbox(t)
	dir := t.TempDir()
	out, rec := filepath.Join(dir, "out.json"), filepath.Join(dir, "rec.jsonl")
	key := "sk-canary-" + rand.Text()
	prov := startProvider(t, messagesAnswer("answered through the sandbox", 10, 5))
	wf := gatewayWorkflow(t, dir, prov.URL, "sandbox: {network: gateway}\n", "-no-chunks", "-call-model", "1", "-record", rec)
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": key}, nil, "run", wf, "--output", out, "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if got := prov.received(); len(got) != 1 || got[0] != key+"|" {
		t.Errorf("the provider got %d requests (%q), want one with the key", len(got), strings.ReplaceAll(strings.Join(got, ","), key, "KEY"))
	}
	assertAgentsGone(t, rec)
	text := readFile(t, out)
	if !strings.Contains(text, "answered through the sandbox") || !strings.Contains(text, `"network":"gateway"`) {
		t.Errorf("the result lacks the answer or the sandbox's network:\n%s", text)
	}
	if strings.Contains(text, key) {
		t.Error("the key is in the result")
	}
}
