package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// policyTestFixture is a path in testdata/policytest: a transcript file of
// a two-step run (claude's requests with acpflow's records, codex's with
// only the answers sent) and policies to test against it.
func policyTestFixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "policytest", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// whatIfLines decodes policy test --json: the requests (and spawns, which
// whatIfSpawns picks), then the totals.
func whatIfLines(t *testing.T, out string) (requests []map[string]any, totals map[string]any) {
	t.Helper()
	requests, _, totals = whatIfResults(t, out)
	return requests, totals
}

// whatIfSpawns decodes policy test --json and returns the spawns and the
// totals.
func whatIfSpawns(t *testing.T, out string) (spawns []map[string]any, totals map[string]any) {
	t.Helper()
	_, spawns, totals = whatIfResults(t, out)
	return spawns, totals
}

func whatIfResults(t *testing.T, out string) (requests, spawns []map[string]any, totals map[string]any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		switch {
		case m["type"] == "request" && totals == nil:
			requests = append(requests, m)
		case m["type"] == "spawn" && totals == nil:
			spawns = append(spawns, m)
		case m["type"] == "totals" && i == len(lines)-1:
			totals = m
		default:
			t.Fatalf("line %d: want requests and spawns, then the totals last; got %s", i+1, line)
		}
	}
	if totals == nil {
		t.Fatalf("no totals in\n%s", out)
	}
	return requests, spawns, totals
}

func TestPolicyTestShowsWhatAPolicyWouldChangeInTranscriptFiles(t *testing.T) {
	dir := t.TempDir()
	run := policyTestFixture(t, "review.transcript.json")

	t.Run("a policy that changes decisions exits 1 and names old and new", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", policyTestFixture(t, "trust-tests.yaml"), "--transcripts", run)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{
			"20261201T090000-aaaa fix: execute \"go test\" `go test ./...`: reject (answered abort; rule not recorded) → allow (workflow rule 3)\n",
			"20261201T090000-aaaa fix: edit \"Edit hello.txt\": allow (answered approved; rule not recorded) → cancel (workflow default)\n",
			"4 requests in 1 run: 2 changed, 2 unchanged\n",
			"  reject → allow: 1\n",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		if strings.Contains(r.stdout, "Read README.md") {
			t.Errorf("an unchanged request is listed:\n%s", r.stdout)
		}
	})

	t.Run("a policy deciding the same by other rules exits 0", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", policyTestFixture(t, "reordered.yaml"), "--transcripts", run)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "4 requests in 1 run: 0 changed, 4 unchanged\n") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("--json prints every request, both rules, then the totals", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", policyTestFixture(t, "reordered.yaml"), "--json", "--transcripts", run)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		reqs, totals := whatIfLines(t, r.stdout)
		if len(reqs) != 4 || totals["requests"] != 4.0 || totals["changed"] != 0.0 || totals["unchanged"] != 4.0 {
			t.Fatalf("%d requests, totals %v", len(reqs), totals)
		}
		rm := reqs[1]
		old, _ := rm["old"].(map[string]any)
		now, _ := rm["new"].(map[string]any)
		if rm["command"] != "make clean && rm -rf build" || rm["changed"] != false || rm["same_rule"] != false ||
			old["decision"] != "reject" || old["rule"] != "2" || old["from"] != "record" || now["decision"] != "reject" || now["rule"] != "1" {
			t.Errorf("the rm request = %v", rm)
		}
	})

	t.Run("the files may follow --transcripts as arguments", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", policyTestFixture(t, "recorded.yaml"), "--json", "--transcripts", run, run)
		if _, totals := whatIfLines(t, r.stdout); r.code != 0 || totals["runs"] != 2.0 || totals["requests"] != 8.0 {
			t.Fatalf("exit %d, totals %v\n%s", r.code, totals, r.stderr)
		}
	})

	t.Run("a workflow's step policy decides its own step's requests", func(t *testing.T) {
		wf := writeWorkflow(t, dir, `name: review
agents:
  demo: {builtin: demo}
policies:
  permission: reject
steps:
  - id: plan
    uses: acp-subagent
    with: {agent: demo, prompt: plan}
  - id: fix
    uses: acp-subagent
    with: {agent: demo, prompt: fix}
    policies:
      permission: allow
`)
		r := acpflow(t, dir, "policy", "test", wf, "--json", "--transcripts", run)
		if r.code != 1 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		reqs, _ := whatIfLines(t, r.stdout)
		var got []string
		for _, m := range reqs {
			now := m["new"].(map[string]any)
			got = append(got, m["step"].(string)+":"+now["decision"].(string)+"/"+now["policy"].(string))
		}
		if want := "plan:reject/workflow plan:reject/workflow fix:allow/step fix:allow/step"; strings.Join(got, " ") != want {
			t.Errorf("decisions = %v, want %s", got, want)
		}
	})

	t.Run("bad usage and a policy that does not load exit 2", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		os.WriteFile(bad, []byte("permission:\n  rules:\n    - {if: 'tool.kidn == \"x\"', then: allow}\n"), 0o644)
		pol := policyTestFixture(t, "recorded.yaml")
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"neither --runs nor --transcripts", []string{pol}, "--runs FILTER"},
			{"both", []string{pol, "--runs", "all", "--transcripts", run}, "not both"},
			{"a policy with a typo", []string{bad, "--transcripts", run}, "bad.yaml:3:"},
			{"a file that is not a transcript", []string{pol, "--transcripts", pol}, "not a transcript file"},
			{"a filter with an unknown key", []string{pol, "--runs", "wrkflow=x"}, `did you mean "workflow"`},
		} {
			r := acpflow(t, dir, append([]string{"policy", "test"}, c.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s: exit %d, want 2 and an error with %q\n%s", c.name, r.code, c.want, r.stderr)
			}
		}
	})
}

func TestPolicyTestReDecidesRecordedRuns(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	wf := writeWorkflow(t, dir, `name: cleanup
agents:
  demo: {builtin: demo}
policies:
  permission:
    rules:
      - if: tool.kind == "read"
        then: allow
    default: reject
steps:
  - id: work
    uses: acp-subagent
    with:
      agent: demo
      prompt: |
        Clean up.
        tool: read README.md
        tool: execute rm -rf build
`)
	if r := acpflow(t, dir, "run", wf, "--state", state, "--workspace", dir); r.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	loose := filepath.Join(dir, "loose.yaml")
	os.WriteFile(loose, []byte("permission: allow\n"), 0o644)

	r := acpflow(t, dir, "runs", "--json", "--state", state)
	var listed map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &listed); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, r.stdout)
	}
	id := listed["run_id"].(string)

	for _, c := range []struct{ name, filter string }{{"all", "all"}, {"a filter", "workflow=cleanup,status=succeeded"}, {"a run id", id}} {
		t.Run("--runs "+c.name+": the workflow's own policy changes nothing", func(t *testing.T) {
			r := acpflow(t, dir, "policy", "test", wf, "--runs", c.filter, "--state", state)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "2 requests in 1 run: 0 changed, 2 unchanged\n") {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("--runs: allowing everything changes the rm", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", loose, "--runs", id, "--state", state)
		want := id + ` work: execute "rm -rf build": reject (workflow default) → allow (workflow shorthand)` + "\n"
		if r.code != 1 || !strings.HasPrefix(r.stdout, want) {
			t.Fatalf("exit %d, want 1 and %q first\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	})
	t.Run("--runs naming no run decides nothing", func(t *testing.T) {
		r := acpflow(t, dir, "policy", "test", loose, "--runs", "workflow=other", "--state", state)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "0 requests in 0 runs") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestPolicyTestReDecidesRecordedSpawnsByNameAndRecordsNoValue(t *testing.T) {
	const (
		ambientSecret  = "ghp_ambient-secret-value-4821"
		plainValue     = "plain-ambient-value-3307"
		explicitSecret = "explicit-secret-value-9931"
	)
	t.Setenv("FOO_TOKEN", ambientSecret)
	t.Setenv("PLAIN_VAR", plainValue)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	// plan spawns its agent under the default env policy (FOO_TOKEN is a
	// credential's name: dropped); fix continues plan's session on the
	// live process and spawns nothing.
	wf := writeWorkflow(t, dir, `name: envs
agents:
  demo:
    builtin: demo
    env: {DEPLOY_KEY: "`+explicitSecret+`"}
steps:
  - id: plan
    uses: acp-subagent
    with: {agent: demo, prompt: plan}
  - id: fix
    needs: [plan]
    uses: acp-subagent
    with: {agent: demo, prompt: fix, session: plan}
`)
	ran := acpflow(t, dir, "run", wf, "--state", state, "--workspace", dir, "--json")
	if ran.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", ran.code, ran.stdout, ran.stderr)
	}
	r := acpflow(t, dir, "runs", "--json", "--state", state)
	var listed map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &listed); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, r.stdout)
	}
	id := listed["run_id"].(string)
	exported := filepath.Join(dir, "run.transcript.json")
	if r := acpflow(t, dir, "export", id, "--state", state, "--output", exported); r.code != 0 {
		t.Fatalf("export: exit %d\n%s", r.code, r.stderr)
	}
	swap := filepath.Join(dir, "swap.yaml")
	os.WriteFile(swap, []byte(`env:
  rules:
    - {if: 'name == "PLAIN_VAR"', then: drop}
    - {if: 'name == "FOO_TOKEN"', then: keep}
`), 0o644)

	var printed []string
	for _, c := range []struct{ name, from string }{{"--runs", "--runs"}, {"--transcripts", "--transcripts"}} {
		source := id
		if c.from == "--transcripts" {
			source = exported
		}
		t.Run(c.name+": a policy that drops PLAIN_VAR and keeps FOO_TOKEN changes both names, exit 1", func(t *testing.T) {
			r := acpflow(t, dir, "policy", "test", swap, c.from, source, "--state", state)
			printed = append(printed, r.stdout, r.stderr)
			want := id + " plan: spawn of demo +FOO_TOKEN -PLAIN_VAR: spawn (default inherit=all,scrub-credentials) → " +
				"spawn (workflow rules(2),inherit=all,scrub-credentials)\n"
			if r.code != 1 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "1 spawn in 1 run: 1 changed, 0 unchanged\n") {
				t.Fatalf("exit %d, want 1 and\n%s\n1 spawn in 1 run: 1 changed\n%s%s", r.code, want, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, " fix") {
				t.Errorf("the step that continued a live session has a spawn:\n%s", r.stdout)
			}
		})
		t.Run(c.name+": the policy the run was recorded with changes nothing, exit 0", func(t *testing.T) {
			r := acpflow(t, dir, "policy", "test", wf, c.from, source, "--state", state)
			printed = append(printed, r.stdout, r.stderr)
			if r.code != 0 || !strings.Contains(r.stdout, "\n1 spawn: 0 changed, 1 unchanged\n") || strings.Contains(r.stdout, "spawn of") {
				t.Fatalf("exit %d, want 0 and 1 spawn unchanged\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}

	t.Run("--json: a step's own env policy decides its spawn, names added and removed", func(t *testing.T) {
		own := filepath.Join(dir, "own.yaml")
		os.WriteFile(own, []byte(`name: envs
agents:
  demo: {builtin: demo}
steps:
  - id: plan
    uses: acp-subagent
    with: {agent: demo, prompt: plan}
    policies:
      env:
        rules:
          - {if: 'name == "PLAIN_VAR"', then: drop}
`), 0o644)
		r := acpflow(t, dir, "policy", "test", own, "--runs", id, "--state", state, "--json")
		printed = append(printed, r.stdout, r.stderr)
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
		spawns, totals := whatIfSpawns(t, r.stdout)
		if len(spawns) != 1 || totals["spawns"] != 1.0 || totals["spawns_changed"] != 1.0 {
			t.Fatalf("%d spawns, totals %v\n%s", len(spawns), totals, r.stdout)
		}
		sp := spawns[0]
		now, _ := sp["new"].(map[string]any)
		old, _ := sp["old"].(map[string]any)
		if sp["step"] != "plan" || sp["changed"] != true || now["policy"] != "step" || old["policy"] != "default" ||
			!reflect.DeepEqual(sp["removed"], []any{"PLAIN_VAR"}) || !reflect.DeepEqual(sp["added"], []any{}) {
			t.Errorf("spawn %v", sp)
		}
	})

	t.Run("the record has the names, and no value reaches the store, the exported file or the output", func(t *testing.T) {
		var f struct {
			Steps []struct {
				Step  string `json:"step"`
				Spawn *struct {
					Ambient, Explicit, Env []string
				} `json:"spawn"`
			} `json:"steps"`
		}
		body := readFile(t, exported)
		if err := json.Unmarshal([]byte(body), &f); err != nil || len(f.Steps) != 2 {
			t.Fatalf("the exported file: %v, %d steps", err, len(f.Steps))
		}
		sp := f.Steps[0].Spawn
		if f.Steps[0].Step != "plan" || sp == nil || f.Steps[1].Spawn != nil {
			t.Fatalf("want plan's spawn only: %s", body)
		}
		if !slices.Contains(sp.Ambient, "FOO_TOKEN") || !slices.Contains(sp.Ambient, "PLAIN_VAR") ||
			!slices.Equal(sp.Explicit, []string{"DEPLOY_KEY"}) || !slices.Contains(sp.Env, "PLAIN_VAR") ||
			!slices.Contains(sp.Env, "DEPLOY_KEY") || slices.Contains(sp.Env, "FOO_TOKEN") {
			t.Errorf("spawn: ambient %v, explicit %v, env %v", sp.Ambient, sp.Explicit, sp.Env)
		}
		secretsAbsent(t, dir, state, id, ran, ambientSecret, plainValue, explicitSecret)
		for _, text := range append(printed, body) {
			for _, v := range []string{ambientSecret, plainValue, explicitSecret} {
				if strings.Contains(text, v) {
					t.Errorf("the value %q was written:\n%s", v, text)
				}
			}
		}
	})
}
