package main

// End to end: the outer policy (issue 15 part 2), through the real binary on
// workflow and policy files, against the test agent, which asks for the
// permissions it is told to and records the environment it was given.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// orgPolicy is an organisation's outer policy: no rm, anywhere in a
// command line, and no AWS_* variable for any agent; everything else is
// left to the workflow.
const orgPolicy = `permission:
  rules:
    - if: 'any(commands(tool.command), # startsWith "rm ")'
      then: reject
      reason: the organisation forbids rm
  default: allow
env:
  scrub-credentials: false
  rules:
    - {if: 'name startsWith "AWS_" || name == "E2E_ORG_ONLY"', then: drop}
`

// writeFile writes body to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// permissiveWorkflow allows what the test agent asks, except a curl by its
// own rule 1, and keeps E2E_ORG_ONLY by an env rule.
func permissiveWorkflow(t *testing.T, dir, record string, tools ...string) string {
	t.Helper()
	args := []string{"-record", record, "-no-chunks"}
	for _, tool := range tools {
		args = append(args, "-permission", tool)
	}
	return writeWorkflow(t, dir, fmt.Sprintf(`name: loose
agents:
  a: {command: %s, args: %s}
policies:
  permission:
    rules:
      - {if: 'tool.command startsWith "curl "', then: reject, reason: no network}
      - {if: true, then: allow_always}
  env:
    rules:
      - {if: 'name == "E2E_ORG_ONLY"', then: keep}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, testAgent, agentArgs(args...)))
}

// stepPermissions is step s's permission records in a --output file.
func stepPermissions(t *testing.T, output string) (string, []map[string]any) {
	t.Helper()
	var res struct {
		Steps map[string]struct {
			Status      string           `json:"status"`
			Output      string           `json:"output"`
			Error       string           `json:"error"`
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, output)), &res); err != nil {
		t.Fatal(err)
	}
	s := res.Steps["s"]
	return s.Output, s.Permissions
}

// wantRecord checks one permission record's decision, layer, policy and rule.
func wantRecord(t *testing.T, where string, p map[string]any, decision, layer, policy, rule string) {
	t.Helper()
	if p["decision"] != decision || p["layer"] != layer || p["policy"] != policy || p["rule"] != rule {
		t.Errorf("%s: %v %v %v %v, want %s by %s %s rule %s (%v)", where, p["decision"], p["layer"], p["policy"], p["rule"], decision, layer, policy, rule, p)
	}
}

func TestAnOuterPolicyRejectsWhatTheWorkflowAllowsAndLetsTheWorkflowDecideTheRest(t *testing.T) {
	dir := t.TempDir()
	outer := writeFile(t, dir, "org/policy.yaml", orgPolicy)
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:make && rm -rf build", "execute:curl https://example.com", "execute:make test")
	out := filepath.Join(dir, "out.jsonl")
	state := filepath.Join(dir, "state.db")
	r := acpflow(t, dir, "run", wf, "--policy", outer, "--json", "--output", out, "--state", state)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	output, perms := stepPermissions(t, out)
	// The agent was answered as for any reject; the workflow's allow_always
	// is answered allow under the outer allow.
	if want := "permission execute make && rm -rf build: opt-reject-once\npermission execute curl https://example.com: opt-reject-once\npermission execute make test: opt-allow-once\n"; output != want {
		t.Errorf("the agent was answered %q, want %q", output, want)
	}
	if len(perms) != 3 {
		t.Fatalf("permissions %v", perms)
	}
	wantRecord(t, "rm", perms[0], "reject", "outer", outer, "1")
	if perms[0]["reason"] != "the organisation forbids rm" {
		t.Errorf("rm: reason %v", perms[0]["reason"])
	}
	wantRecord(t, "curl", perms[1], "reject", "workflow", "workflow", "1")
	wantRecord(t, "make test", perms[2], "allow", "workflow", "workflow", "2")
	if reason, _ := perms[2]["reason"].(string); !strings.Contains(reason, "allow_always capped to allow by the outer policy ("+outer+")") {
		t.Errorf("make test: reason %q", reason)
	}

	// The same records in the event stream, show --json and show.
	var events []map[string]any
	for _, e := range jsonEvents(t, r.stdout) {
		if e["type"] == "permission" {
			events = append(events, e)
		}
	}
	if len(events) != 3 || events[0]["layer"] != "outer" || events[0]["policy"] != outer || events[1]["layer"] != "workflow" {
		t.Errorf("permission events %v", events)
	}
	id := runID(t, out)
	shown := acpflow(t, dir, "show", id, "--json", "--state", state)
	var detail struct {
		Steps map[string]struct {
			Permissions []map[string]any `json:"permissions"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(shown.stdout), &detail); err != nil {
		t.Fatalf("show --json: %v\n%s", err, shown.stdout)
	}
	if p := detail.Steps["s"].Permissions; len(p) != 3 {
		t.Errorf("show --json permissions %v", p)
	} else {
		wantRecord(t, "show --json rm", p[0], "reject", "outer", outer, "1")
		wantRecord(t, "show --json curl", p[1], "reject", "workflow", "workflow", "1")
	}
	human := acpflow(t, dir, "show", id, "--state", state)
	for _, want := range []string{
		`permission execute "make && rm -rf build": reject -> opt-reject-once (outer policy ` + outer + `, rule 1): the organisation forbids rm`,
		`permission execute "curl https://example.com": reject -> opt-reject-once (workflow policy, rule 1): no network`,
	} {
		if !strings.Contains(human.stdout, want) {
			t.Errorf("show does not say %q:\n%s", want, human.stdout)
		}
	}
}

func TestTheOuterPolicyFilesStackAndNoneLoosensAnEarlierOne(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:rm -rf build", "execute:git push", "execute:make test")
	// The system's file forbids rm; $ACPFLOW_POLICY tries to allow
	// everything always and forbids git push; --policy cancels make.
	writeFile(t, filepath.Dir(systemPolicy), "policy.yaml", orgPolicy)
	t.Cleanup(func() { os.Remove(systemPolicy) })
	envPolicy := writeFile(t, dir, "env-policy.yaml", `permission:
  rules:
    - {if: 'tool.command startsWith "git push"', then: reject_always}
  default: allow_always
`)
	t.Setenv("ACPFLOW_POLICY", envPolicy)
	flagPolicy := writeFile(t, dir, "flag-policy.yaml", `permission:
  rules:
    - {if: 'tool.command == "make test"', then: cancel}
  default: allow
`)
	out := filepath.Join(dir, "out.jsonl")
	r := acpflow(t, dir, "run", wf, "--policy", flagPolicy, "--output", out)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	_, perms := stepPermissions(t, out)
	if len(perms) != 3 {
		t.Fatalf("permissions %v", perms)
	}
	wantRecord(t, "rm (the system's)", perms[0], "reject", "outer", systemPolicy, "1")
	wantRecord(t, "git push ($ACPFLOW_POLICY)", perms[1], "reject_always", "outer", envPolicy, "1")
	wantRecord(t, "make test (--policy)", perms[2], "cancel", "outer", flagPolicy, "1")

	// validate lists each file, outermost first.
	v := acpflow(t, dir, "validate", wf, "--policy", flagPolicy)
	want := fmt.Sprintf("outer policy %s: ok (permission, env)\nouter policy %s: ok (permission)\nouter policy %s: ok (permission)\n%s: ok (loose, 1 steps)\n",
		systemPolicy, envPolicy, flagPolicy, wf)
	if v.code != 0 || v.stdout != want {
		t.Errorf("validate: exit %d\n%s\nwant\n%s%s", v.code, v.stdout, want, v.stderr)
	}
}

// validate names every part an outer policy file holds, the §9/§10 ones
// too: a file with only sandbox:, approvals: and telemetry: is not "ok ()".
func TestValidateNamesWhatAnOuterPolicyFileHolds(t *testing.T) {
	dir := t.TempDir()
	outer := writeFile(t, dir, "org.yaml", "sandbox: required\n"+
		"approvals: {webhook: \"https://relay.example.com/acpflow\", secret: s3cret}\n"+
		"telemetry: {endpoint: \"https://otel.example.com:4318\"}\n")
	wf := writeWorkflow(t, dir, "name: w\nsteps:\n  - {id: a, run: echo hi}\n")
	v := acpflow(t, dir, "validate", wf, "--policy", outer)
	if want := fmt.Sprintf("outer policy %s: ok (sandbox, approvals, telemetry)\n", outer); v.code != 0 || !strings.Contains(v.stdout, want) {
		t.Errorf("validate: exit %d\n%s\nwant a line\n%s%s", v.code, v.stdout, want, v.stderr)
	}
}

func TestAnOuterPolicyFromTheEnvironmentRejectsWhatTheWorkflowAllows(t *testing.T) {
	dir := t.TempDir()
	outer := writeFile(t, dir, "org.yaml", orgPolicy)
	t.Setenv("ACPFLOW_POLICY", outer)
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:rm -rf build")
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, dir, "run", wf, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	_, perms := stepPermissions(t, out)
	if len(perms) != 1 {
		t.Fatalf("permissions %v", perms)
	}
	wantRecord(t, "rm", perms[0], "reject", "outer", outer, "1")
	// The agent does not get $ACPFLOW_POLICY: it is acpflow's own setting.
	if env := readRecords(t, record)[0]["env"].(map[string]any); env["ACPFLOW_POLICY"] != nil {
		t.Errorf("the agent got ACPFLOW_POLICY: %v", env)
	}
}

func TestAnOuterEnvRuleDropsAnAmbientVariableTheWorkflowKeeps(t *testing.T) {
	const value = "org-only-value-5521"
	t.Setenv("E2E_ORG_ONLY", value)
	dir := t.TempDir()
	outer := writeFile(t, dir, "org.yaml", orgPolicy)
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record)

	// Without the outer policy, the workflow's keep rule passes it.
	if r := acpflow(t, dir, "run", wf); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if env := readRecords(t, record)[0]["env"].(map[string]any); env["E2E_ORG_ONLY"] != value {
		t.Fatalf("without the outer policy the agent got %v, want E2E_ORG_ONLY kept by the workflow's rule", env["E2E_ORG_ONLY"])
	}
	os.Remove(record)

	r := acpflow(t, dir, "run", wf, "--policy", outer, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	env := readRecords(t, record)[0]["env"].(map[string]any)
	if _, ok := env["E2E_ORG_ONLY"]; ok {
		t.Errorf("the agent got E2E_ORG_ONLY through the outer policy's drop rule")
	}
	if env["PATH"] == nil {
		t.Errorf("the agent has no PATH: %v", env)
	}
	var envEvent map[string]any
	for _, e := range jsonEvents(t, r.stdout) {
		if e["type"] == "step_update" && e["kind"] == "env" {
			envEvent = e
		}
	}
	outerRules, _ := envEvent["outer"].([]any)
	if envEvent["policy"] != "workflow" || len(outerRules) != 1 || !strings.Contains(fmt.Sprint(outerRules[0]), outer) {
		t.Errorf("env event %v: want the workflow's policy after the outer file %s", envEvent, outer)
	}
	if strings.Contains(r.stdout, value) {
		t.Errorf("the event stream shows the dropped value")
	}
}

func TestAnExplicitEnvTheOuterPolicyForbidsFailsTheStepBeforeTheSpawn(t *testing.T) {
	const secret = "aws-explicit-secret-8812"
	for _, tc := range []struct {
		name, agentEnv, stepEnv, setBy string
	}{
		{"in the agent's env", `env: {AWS_SECRET_ACCESS_KEY: ` + secret + `}`, "", "agent a's env"},
		{"in the step's env", "", `, env: {AWS_SECRET_ACCESS_KEY: ` + secret + `}`, "step s's env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			outer := writeFile(t, dir, "org.yaml", orgPolicy)
			record := filepath.Join(dir, "record.jsonl")
			wf := writeWorkflow(t, dir, fmt.Sprintf(`name: explicit
agents:
  a:
    command: %s
    args: %s
    %s
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi%s}}
`, testAgent, agentArgs("-record", record), tc.agentEnv, tc.stepEnv))
			out := filepath.Join(dir, "out.jsonl")
			state := filepath.Join(dir, "state.db")
			r := acpflow(t, dir, "run", wf, "--policy", outer, "--json", "--output", out, "--state", state)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			if readRecords(t, record) != nil {
				t.Error("the agent was spawned")
			}
			var res struct {
				Steps map[string]struct {
					Status, StopReason, Error string
				} `json:"steps"`
			}
			json.Unmarshal([]byte(readFile(t, out)), &res)
			want := fmt.Sprintf("outer policy (%s) refuses AWS_SECRET_ACCESS_KEY set by %s (rule 1); nothing was spawned", outer, tc.setBy)
			if s := res.Steps["s"]; s.Status != "failed" || s.Error != want {
				t.Errorf("step %s: %q\nwant failed: %q", s.Status, s.Error, want)
			}
			secretsAbsent(t, dir, state, runID(t, out), r, secret)
		})
	}
}

func TestABrokenOrMissingOuterPolicyIsBadUsageAndStartsNothing(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:ls")
	broken := writeFile(t, dir, "broken.yaml", "permission:\n  rules:\n    - {if: 'tool.kidn == \"x\"', then: allow}\n")
	req := writeFile(t, dir, "req.json", `{"kind": "permission", "tool": {"kind": "execute", "raw_input": {"command": "ls"}}, "options": [{"id": "a1", "kind": "allow_once"}]}`)
	state := filepath.Join(dir, "state.db")
	for _, args := range [][]string{
		{"run", wf, "--state", state, "--policy", broken},
		{"validate", wf, "--policy", broken},
		{"policy", "eval", wf, "--request", req, "--policy", broken},
		{"policy", "test", wf, "--runs", "all", "--state", state, "--policy", broken},
		{"probe", "--policy", broken, "--", testAgent, "-record", record},
	} {
		t.Run(strings.Join(args[:2], " ")+" with a broken --policy", func(t *testing.T) {
			r := acpflow(t, dir, args...)
			if r.code != 2 || !strings.Contains(r.stderr, "the outer policy (--policy) does not load") ||
				!strings.Contains(r.stderr, "broken.yaml:3:") || !strings.Contains(r.stderr, `did you mean "kind"`) {
				t.Errorf("exit %d\n%s", r.code, r.stderr)
			}
		})
	}
	t.Run("a missing --policy file", func(t *testing.T) {
		r := acpflow(t, dir, "run", wf, "--state", state, "--policy", filepath.Join(dir, "nope.yaml"))
		if r.code != 2 || !strings.Contains(r.stderr, "--policy "+filepath.Join(dir, "nope.yaml")+": no such file") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("a missing $ACPFLOW_POLICY file", func(t *testing.T) {
		t.Setenv("ACPFLOW_POLICY", filepath.Join(dir, "gone.yaml"))
		r := acpflow(t, dir, "run", wf, "--state", state)
		if r.code != 2 || !strings.Contains(r.stderr, "$ACPFLOW_POLICY "+filepath.Join(dir, "gone.yaml")+": no such file") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("a broken system file", func(t *testing.T) {
		writeFile(t, filepath.Dir(systemPolicy), "policy.yaml", "permission: alow\n")
		t.Cleanup(func() { os.Remove(systemPolicy) })
		r := acpflow(t, dir, "run", wf, "--state", state)
		if r.code != 2 || !strings.Contains(r.stderr, "the outer policy (the system's) does not load") ||
			!strings.Contains(r.stderr, systemPolicy+":1:") || !strings.Contains(r.stderr, `did you mean "allow"`) {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
	if readRecords(t, record) != nil {
		t.Error("an agent was spawned")
	}
	if runs := acpflow(t, dir, "runs", "--json", "--state", state); strings.TrimSpace(runs.stdout) != "" {
		t.Errorf("a run was recorded:\n%s", runs.stdout)
	}
}

func TestPolicyEvalDecidesWithinTheOuterPolicyAndSaysWhichLayer(t *testing.T) {
	dir := t.TempDir()
	outer := writeFile(t, dir, "org.yaml", orgPolicy)
	wf := permissiveWorkflow(t, dir, filepath.Join(dir, "record.jsonl"))
	permReq := func(name, command string) string {
		return writeFile(t, dir, name, fmt.Sprintf(`{"kind": "permission", "tool": {"kind": "execute", "raw_input": {"command": %q}},
 "options": [{"id": "a1", "kind": "allow_once"}, {"id": "aa", "kind": "allow_always"}, {"id": "r1", "kind": "reject_once"}]}`, command))
	}
	eval := func(args ...string) map[string]any {
		t.Helper()
		r := acpflow(t, dir, append([]string{"policy", "eval"}, args...)...)
		var m map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		return m
	}
	rm, curl, mk := permReq("rm.json", "make && rm -rf build"), permReq("curl.json", "curl https://x"), permReq("make.json", "make")
	for _, tc := range []struct {
		args                               []string
		decision, layer, policy, rule, opt string
	}{
		{[]string{wf, "--request", rm}, "allow_always", "workflow", "workflow", "2", "aa"},
		{[]string{wf, "--request", rm, "--policy", outer}, "reject", "outer", outer, "1", "r1"},
		{[]string{wf, "--request", curl, "--policy", outer}, "reject", "workflow", "workflow", "1", "r1"},
		{[]string{wf, "--request", mk, "--policy", outer}, "allow", "workflow", "workflow", "2", "a1"},
		// A bare policy file is the workflow's layer in its turn.
		{[]string{outer, "--request", mk, "--policy", outer}, "allow", "workflow", "workflow", "default", "a1"},
	} {
		m := eval(tc.args...)
		if m["decision"] != tc.decision || m["layer"] != tc.layer || m["policy"] != tc.policy || m["rule"] != tc.rule || m["option_id"] != tc.opt {
			t.Errorf("policy eval %v = %v\nwant %s by %s %s rule %s (%s)", tc.args, m, tc.decision, tc.layer, tc.policy, tc.rule, tc.opt)
		}
	}

	envReq := writeFile(t, dir, "env.json", `{"kind": "env", "agent": "a", "ambient": {"PATH": "/bin", "E2E_ORG_ONLY": "o", "AWS_REGION": "eu"},
 "explicit": {"K": "v"}}`)
	m := eval(wf, "--request", envReq, "--policy", outer)
	if fmt.Sprint(m["env"]) != "map[K:v PATH:/bin]" || m["layer"] != "workflow" || m["policy"] != "workflow" || !strings.Contains(fmt.Sprint(m["outer"]), outer) {
		t.Errorf("env answer %v", m)
	}
	forbidden := writeFile(t, dir, "forbidden.json", `{"kind": "env", "agent": "a", "ambient": {"PATH": "/bin"}, "explicit": {"AWS_SECRET_ACCESS_KEY": "aws-eval-secret-1234"}}`)
	m = eval(wf, "--request", forbidden, "--policy", outer)
	want := "outer policy (" + outer + ") refuses AWS_SECRET_ACCESS_KEY set by the workflow's env (rule 1); nothing was spawned"
	if m["deny"] != want || m["layer"] != "outer" || m["policy"] != outer || m["rule"] != "1" || m["env"] != nil {
		t.Errorf("env answer %v\nwant deny %q", m, want)
	}
}

func TestPolicyTestReDecidesRecordedRequestsWithinTheOuterPolicy(t *testing.T) {
	dir := t.TempDir()
	outer := writeFile(t, dir, "org.yaml", orgPolicy)
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:rm -rf build", "execute:make test")
	state := filepath.Join(dir, "state.db")
	out := filepath.Join(dir, "out.jsonl")
	if r := acpflow(t, dir, "run", wf, "--state", state, "--output", out); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	id := runID(t, out)
	// Without the outer policy nothing changes.
	if r := acpflow(t, dir, "policy", "test", wf, "--runs", id, "--state", state); r.code != 0 {
		t.Errorf("policy test without an outer policy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := acpflow(t, dir, "policy", "test", wf, "--runs", id, "--state", state, "--policy", outer, "--json")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (a decision changed)\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs, totals := whatIfLines(t, r.stdout)
	if len(reqs) != 2 || totals["changed"] != 2.0 {
		t.Fatalf("requests %v, totals %v", reqs, totals)
	}
	rmNew, _ := reqs[0]["new"].(map[string]any)
	if rmNew["decision"] != "reject" || rmNew["layer"] != "outer" || rmNew["policy"] != outer || rmNew["rule"] != "1" {
		t.Errorf("rm re-decided %v", rmNew)
	}
	// The workflow's allow_always, capped to allow by the outer policy.
	makeOld, _ := reqs[1]["old"].(map[string]any)
	makeNew, _ := reqs[1]["new"].(map[string]any)
	if makeOld["decision"] != "allow_always" || makeOld["layer"] != "workflow" || makeNew["decision"] != "allow" || makeNew["layer"] != "workflow" {
		t.Errorf("make re-decided %v → %v", makeOld, makeNew)
	}
	human := acpflow(t, dir, "policy", "test", wf, "--runs", id, "--state", state, "--policy", outer)
	if want := "allow_always (workflow rule 2) → reject (outer " + outer + " rule 1)"; !strings.Contains(human.stdout, want) {
		t.Errorf("policy test does not say %q:\n%s", want, human.stdout)
	}
}

func TestASystemPolicyTheUserCannotReadStopsTheRunAsAnUnprivilegedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	// The organisation's file, root's and private: nobody cannot read it,
	// and must not run as if there were none.
	writeFile(t, filepath.Dir(systemPolicy), "policy.yaml", "permission: reject\n")
	os.Chmod(systemPolicy, 0o600)
	t.Cleanup(func() { os.Remove(systemPolicy) })
	dir, err := os.MkdirTemp("", "acpflow-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	record := filepath.Join(dir, "record.jsonl")
	wf := permissiveWorkflow(t, dir, record, "execute:rm -rf build")
	cmd := exec.Command(acpflowBin, "run", wf, "--workspace", dir, "--state", filepath.Join(dir, "state.db"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "the outer policy (the system's) does not load") ||
		!strings.Contains(stderr.String(), "permission denied") {
		t.Fatalf("exit = %v, want 2 saying the system's file cannot be read\n%s", err, stderr.String())
	}
	if readRecords(t, record) != nil {
		t.Error("the agent was spawned")
	}
}
