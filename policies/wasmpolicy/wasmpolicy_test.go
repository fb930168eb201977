package wasmpolicy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/policies/wasmpolicy"
	"github.com/acpflow/acpflow/wasm"
)

// The modules come from the wasm package: its hostile test modules and the
// prebuilt strict examples, which are committed, so these tests never skip.
const (
	hostile  = "../../wasm/testdata/"
	prebuilt = "../../wasm/examples/prebuilt/"
)

func wasmHost(t testing.TB) *wasm.Host {
	t.Helper()
	h, err := wasm.NewHost(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	return h
}

// loadModule loads the module at path. A zero time limit becomes a minute, not
// the default second: a test that is not about time must not depend on a
// loaded machine running the module within a second (a memory bomb lost
// that race to the default second at load 12). A test of the time limit
// sets it.
func loadModule(t testing.TB, h *wasm.Host, path string, limits wasm.Limits) *wasm.Module {
	t.Helper()
	if limits.Timeout == 0 {
		limits.Timeout = time.Minute
	}
	m, err := h.Load(context.Background(), path, limits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// strictModules are the prebuilt examples that implement both kinds.
var strictModules = []string{"c.wasm", "c-reactor.wasm", "rust.wasm", "assemblyscript.wasm", "wat.wasm", "go.wasm"}

func permissionRequest(kind, command string, locations ...policies.ToolLocation) *policies.PermissionRequest {
	return &policies.PermissionRequest{
		Request: policies.Request{Workflow: "review", RunID: "r-1", Step: "plan", Agent: "claude", Workspace: "/ws", Cwd: "/ws"},
		Tool: policies.Tool{ID: "call_1", Kind: kind, Title: kind, Status: "pending",
			RawInput: map[string]any{"command": command}, Command: command, Locations: locations},
		Options: []policies.Option{
			{ID: "a1", Name: "Allow once", Kind: "allow_once"},
			{ID: "r1", Name: "Reject", Kind: "reject_once"},
		},
	}
}

func TestWASMPermissionDecidesThroughTheModule(t *testing.T) {
	cases := []struct {
		name string
		req  *policies.PermissionRequest
		want policies.Verdict
	}{
		{"a read is allowed", permissionRequest("read", ""), policies.Verdict{Decision: policies.Allow, Reason: "read-only tool"}},
		{"an edit inside the workspace is allowed",
			permissionRequest("edit", "", policies.ToolLocation{Path: "/ws/a", InWorkspace: true}),
			policies.Verdict{Decision: policies.Allow, Reason: "edit inside the workspace"}},
		{"an edit with no locations is rejected", permissionRequest("edit", ""),
			policies.Verdict{Decision: policies.Reject, Reason: "not allowed by the strict policy"}},
		// && reaches the module as written, not as \u0026\u0026: the WAT
		// module matches bytes and would miss it otherwise.
		{"make && rm is rejected as destructive", permissionRequest("execute", "make && rm -rf x"),
			policies.Verdict{Decision: policies.Reject, Reason: "destructive or networked command"}},
		{"a pipe into sudo is rejected as destructive", permissionRequest("execute", "ls <x | sudo tee /etc/x"),
			policies.Verdict{Decision: policies.Reject, Reason: "destructive or networked command"}},
	}
	h := wasmHost(t)
	for _, file := range strictModules {
		t.Run(file, func(t *testing.T) {
			p := wasmpolicy.NewPermission(loadModule(t, h, prebuilt+file, wasm.Limits{}), "", nil)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					v, err := p.DecidePermission(context.Background(), c.req)
					c.want.Rule = file
					if err != nil || v != c.want {
						t.Errorf("DecidePermission = %+v, %v; want %+v", v, err, c.want)
					}
				})
			}
		})
	}
}

func TestWASMPoliciesSendTheRequestsOfTheSpec(t *testing.T) {
	h := wasmHost(t)
	echo := loadModule(t, h, hostile+"echo.wasm", wasm.Limits{})
	config := map[string]any{"allow_paths": []string{"src/"}}

	req := permissionRequest("execute", "a && b <c>", policies.ToolLocation{Path: "/ws/a", Line: 3, InWorkspace: true})
	v, err := wasmpolicy.NewPermission(echo, "", config).DecidePermission(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Version and kind first, then the fields of docs/policies.md#permission-policies in order,
	// characters as the agent sent them (no \u0026 for &).
	want := `{"version":1,"kind":"permission","workflow":"review","run_id":"r-1","step":"plan","agent":"claude",` +
		`"workspace":"/ws","cwd":"/ws","tool":{"id":"call_1","kind":"execute","title":"execute","status":"pending",` +
		`"raw_input":{"command":"a && b <c>"},"command":"a && b <c>","locations":[{"path":"/ws/a","line":3,"in_workspace":true}]},` +
		`"options":[{"id":"a1","name":"Allow once","kind":"allow_once"},{"id":"r1","name":"Reject","kind":"reject_once"}],` +
		`"config":{"allow_paths":["src/"]}}`
	if v.Reason != want {
		t.Errorf("the module read\n%s\nwant\n%s", v.Reason, want)
	}

	v, err = wasmpolicy.NewPermission(echo, "", nil).DecidePermission(context.Background(), &policies.PermissionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Reason, `"options":[],"config":{}}`) || !strings.Contains(v.Reason, `"locations":[]`) {
		t.Errorf("empty lists and config must be [] and {}, not null: %s", v.Reason)
	}

	d, err := wasmpolicy.NewEnv(echo, "", config).DecideEnv(context.Background(),
		envRequest(map[string]string{"HOME": "/h", "GITHUB_TOKEN": "t"}, map[string]string{"X": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	want = `{"version":1,"kind":"env","workflow":"review","run_id":"r-1","step":"plan","agent":"claude","workspace":"/ws","cwd":"/ws",` +
		`"ambient":{"GITHUB_TOKEN":"t","HOME":"/h"},"explicit":{"X":"1"},"proposed":{"HOME":"/h","X":"1"},"config":{"allow_paths":["src/"]}}`
	if d.Deny != want {
		t.Errorf("the module read\n%s\nwant\n%s", d.Deny, want)
	}
}

// answering returns a permission policy whose module answers answer: the
// answer.wasm test module echoes config.answer.
func answering(t *testing.T, h *wasm.Host, answer string) *wasmpolicy.Permission {
	t.Helper()
	m := loadModule(t, h, hostile+"answer.wasm", wasm.Limits{})
	return wasmpolicy.NewPermission(m, "", map[string]any{"answer": json.RawMessage(answer)})
}

func TestWASMPermissionFailsClosed(t *testing.T) {
	cases := []struct {
		name, file string
		limits     wasm.Limits
		want       string
	}{
		{"an infinite loop", "loop.wasm", wasm.Limits{Timeout: 200 * time.Millisecond}, "policy module ../../wasm/testdata/loop.wasm timed out after 200ms"},
		// The memory limit is what is under test, not a race with the
		// time limit: on a loaded machine the default second ran out first.
		{"a memory bomb", "membomb.wasm", wasm.Limits{Timeout: time.Minute}, "policy module ../../wasm/testdata/membomb.wasm went over its memory limit of 32 MiB"},
		{"a 100 MiB answer", "bigoutput.wasm", wasm.Limits{}, "policy module ../../wasm/testdata/bigoutput.wasm: answer over the 1 MiB limit"},
		{"a trap", "trap.wasm", wasm.Limits{}, "policy module ../../wasm/testdata/trap.wasm trapped: unreachable"},
		{"an answer that is not JSON", "badjson.wasm", wasm.Limits{}, "policy module ../../wasm/testdata/badjson.wasm: answer is not a JSON object"},
		{"a decision that is not one of the six words", "wrongword.wasm", wasm.Limits{}, `policy module ../../wasm/testdata/wrongword.wasm: answer: decision "maybe": want allow, allow_always, reject, reject_always, cancel or ask`},
		{"exit code 1", "exit1.wasm", wasm.Limits{}, "policy module ../../wasm/testdata/exit1.wasm exited with code 1 (stderr: malformed request)"},
		{"an answer of the wrong shape", "counter.wasm", wasm.Limits{}, `policy module ../../wasm/testdata/counter.wasm: answer has an unknown member "calls"; want decision or reason`},
	}
	h := wasmHost(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := wasmpolicy.NewPermission(loadModule(t, h, hostile+c.file, c.limits), "", nil)
			rec := policies.Answer(context.Background(), p, policies.SourceStep, permissionRequest("read", ""))
			if rec.Decision != policies.Reject || rec.Outcome != policies.OutcomeSelected || rec.OptionID != "r1" {
				t.Errorf("record = %+v, want the reject option selected", rec)
			}
			if rec.Rule != c.file {
				t.Errorf("rule = %q, want the module's file name %q", rec.Rule, c.file)
			}
			if want := "policy error: " + c.want; !strings.HasPrefix(rec.Reason, want) {
				t.Errorf("reason = %q\nwant it to start with %q", rec.Reason, want)
			}
		})
	}
}

func TestWASMPermissionChecksTheAnswersShape(t *testing.T) {
	cases := []struct {
		name, answer string
		want         policies.Verdict
		err          string
	}{
		{"a decision and a reason", `{"decision":"allow_always","reason":"trusted"}`, policies.Verdict{Decision: policies.AllowAlways, Reason: "trusted"}, ""},
		{"a decision alone", `{"decision":"cancel"}`, policies.Verdict{Decision: policies.Cancel}, ""},
		{"no decision", `{"reason":"why not"}`, policies.Verdict{}, `answer has no "decision"`},
		{"a misspelt member", `{"decision":"allow","reson":"x"}`, policies.Verdict{}, `answer has an unknown member "reson"`},
		// Members given twice or in another case: encoding/json would take
		// the last (or the case-insensitive match), other decoders the
		// first. Every one fails closed, naming the member.
		{"a case-variant decision after the decision", `{"decision":"reject","Decision":"allow"}`, policies.Verdict{}, `answer has "Decision", not "decision": member names are case-sensitive`},
		{"a case-variant decision alone", `{"DECISION":"allow"}`, policies.Verdict{}, `answer has "DECISION", not "decision"`},
		{"a decision given twice", `{"decision":"reject","decision":"allow"}`, policies.Verdict{}, `answer has "decision" twice`},
		{"a decision given twice, once escaped", `{"decision":"reject","\u0064ecision":"allow"}`, policies.Verdict{}, `answer has "decision" twice`},
		{"a reason given twice", `{"decision":"reject","reason":"a","reason":"b"}`, policies.Verdict{}, `answer has "reason" twice`},
		{"a case-variant reason", `{"decision":"reject","Reason":"b"}`, policies.Verdict{}, `answer has "Reason", not "reason"`},
		{"a reason spelt with a folding letter", "{\"decision\":\"reject\",\"rea\u017fon\":\"b\"}", policies.Verdict{}, `not "reason": member names are case-sensitive`},
		{"a reason that is not a string", `{"decision":"cancel","reason":["x"]}`, policies.Verdict{}, "answer: reason: a JSON array where a string belongs"},
		{"a null reason is no reason", `{"decision":"cancel","reason":null}`, policies.Verdict{Decision: policies.Cancel}, ""},
		{"a decision that is not a string", `{"decision":1}`, policies.Verdict{}, "answer: decision: a JSON number where a string belongs"},
		{"an empty decision", `{"decision":""}`, policies.Verdict{}, `decision "": want allow`},
		{"a null decision", `{"decision":null}`, policies.Verdict{}, `answer has no "decision"`},
	}
	h := wasmHost(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := answering(t, h, c.answer).DecidePermission(context.Background(), permissionRequest("read", ""))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("DecidePermission = %+v, %v; want an error containing %q", v, err, c.err)
				}
				if v.Rule != "answer.wasm" {
					t.Errorf("the failed verdict's rule is %q, want the module named", v.Rule)
				}
				return
			}
			c.want.Rule = "answer.wasm"
			if err != nil || v != c.want {
				t.Errorf("DecidePermission = %+v, %v; want %+v", v, err, c.want)
			}
		})
	}
}

func TestWASMPermissionRecordsTheGivenName(t *testing.T) {
	h := wasmHost(t)
	p := wasmpolicy.NewPermission(loadModule(t, h, prebuilt+"c.wasm", wasm.Limits{}), "org-policy.wasm", nil)
	v, err := p.DecidePermission(context.Background(), permissionRequest("read", ""))
	if err != nil || v.Rule != "org-policy.wasm" {
		t.Errorf("DecidePermission = %+v, %v; want rule org-policy.wasm", v, err)
	}
}

func TestWASMPermissionIsSafeForConcurrentUse(t *testing.T) {
	h := wasmHost(t)
	for _, file := range []string{"c.wasm", "c-reactor.wasm"} {
		p := wasmpolicy.NewPermission(loadModule(t, h, prebuilt+file, wasm.Limits{}), "", nil)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 25; j++ {
					req, want := permissionRequest("execute", "ls"), policies.Reject
					if j%2 == 0 {
						req, want = permissionRequest("search", ""), policies.Allow
					}
					if v, err := p.DecidePermission(context.Background(), req); err != nil || v.Decision != want {
						t.Errorf("%s: %+v, %v; want %s", file, v, err, want)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

func envRequest(ambient, explicit map[string]string) *policies.EnvRequest {
	return &policies.EnvRequest{
		Request:  policies.Request{Workflow: "review", RunID: "r-1", Step: "plan", Agent: "claude", Workspace: "/ws", Cwd: "/ws"},
		Ambient:  ambient,
		Explicit: explicit,
	}
}

func TestWASMEnvDecidesThroughTheModule(t *testing.T) {
	ambient := map[string]string{
		"HOME": "/home/u", "PATH": "/usr/bin", "AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "s",
		"ANTHROPIC_API_KEY": "sk-ambient", "ACPFLOW_DEBUG": "1", "MOTD": "a && b <c> \"q\" é",
	}
	explicit := map[string]string{"AWS_PROFILE": "dev", "CODEX_API_KEY": "sk-explicit"}
	h := wasmHost(t)
	for _, file := range strictModules {
		t.Run(file, func(t *testing.T) {
			e := wasmpolicy.NewEnv(loadModule(t, h, prebuilt+file, wasm.Limits{}), "", nil)
			d, err := e.DecideEnv(context.Background(), envRequest(ambient, explicit))
			if err != nil {
				t.Fatal(err)
			}
			// DefaultEnv proposes without credentials and ACPFLOW_*; the
			// module drops AWS_*, the explicit AWS_PROFILE included.
			want := map[string]string{"HOME": "/home/u", "PATH": "/usr/bin", "MOTD": "a && b <c> \"q\" é", "CODEX_API_KEY": "sk-explicit"}
			if !maps.Equal(d.Env, want) || d.Deny != "" || d.Rule != file {
				t.Errorf("DecideEnv = %+v, want env %v and rule %s", d, want, file)
			}

			d, err = e.DecideEnv(context.Background(), envRequest(map[string]string{"PATH": "/usr/bin"}, nil))
			if err != nil || d.Deny != "no HOME" || d.Env != nil || d.Rule != file {
				t.Errorf("without HOME: DecideEnv = %+v, %v; want deny \"no HOME\"", d, err)
			}
		})
	}
}

func TestWASMEnvProposesWhatItsBaseGives(t *testing.T) {
	h := wasmHost(t)
	e := wasmpolicy.NewEnv(loadModule(t, h, prebuilt+"c.wasm", wasm.Limits{}), "", nil)
	e.Base = &policies.EnvRules{Inherit: policies.InheritNone}
	d, err := e.DecideEnv(context.Background(), envRequest(map[string]string{"HOME": "/h", "PATH": "/bin"}, map[string]string{"HOME": "/explicit"}))
	want := map[string]string{"HOME": "/explicit"}
	if err != nil || !maps.Equal(d.Env, want) {
		t.Errorf("DecideEnv = %+v, %v; want %v (inherit none: only the explicit values are proposed)", d, err, want)
	}

	e.Base = &policies.EnvRules{Inherit: "some"}
	if _, err := e.DecideEnv(context.Background(), envRequest(nil, nil)); err == nil ||
		!strings.Contains(err.Error(), `policy module ../../wasm/examples/prebuilt/c.wasm: proposing the environment: env inherit "some"`) {
		t.Errorf("a failing base: %v, want its error, naming the module", err)
	}
}

func TestWASMEnvChecksTheAnswersShape(t *testing.T) {
	cases := []struct {
		name, answer string
		want         policies.EnvDecision
		err          string
	}{
		{"an environment", `{"env":{"HOME":"/h","X":""}}`, policies.EnvDecision{Env: map[string]string{"HOME": "/h", "X": ""}}, ""},
		{"an empty environment", `{"env":{}}`, policies.EnvDecision{Env: map[string]string{}}, ""},
		{"a refusal", `{"deny":"not on Fridays"}`, policies.EnvDecision{Deny: "not on Fridays"}, ""},
		{"a value that is not a string", `{"env":{"N":1}}`, policies.EnvDecision{}, `answer: env: "N" is a JSON number where a string belongs`},
		{"env that is not an object", `{"env":["A=1"]}`, policies.EnvDecision{}, "answer: env: a JSON array where an object belongs"},
		{"a case-variant env", `{"env":{},"Env":{"X":"1"}}`, policies.EnvDecision{}, `answer has "Env", not "env": member names are case-sensitive`},
		{"env given twice", `{"env":{},"env":{"X":"1"}}`, policies.EnvDecision{}, `answer has "env" twice`},
		{"a case-variant deny", `{"env":{"X":"1"},"DENY":"no"}`, policies.EnvDecision{}, `answer has "DENY", not "deny"`},
		{"deny given twice", `{"deny":"no","deny":"yes"}`, policies.EnvDecision{}, `answer has "deny" twice`},
		{"a variable set twice", `{"env":{"PATH":"/bin","PATH":"/tmp/evil"}}`, policies.EnvDecision{}, `answer sets "PATH" twice`},
		{"a variable set twice, once escaped", `{"env":{"PATH":"/bin","\u0050ATH":"/tmp/evil"}}`, policies.EnvDecision{}, `answer sets "PATH" twice`},
		{"variables that differ in case are two variables", `{"env":{"Path":"/a","PATH":"/b"}}`, policies.EnvDecision{Env: map[string]string{"Path": "/a", "PATH": "/b"}}, ""},
		{"both env and deny", `{"env":{},"deny":"x"}`, policies.EnvDecision{}, `answer has both "env" and "deny"`},
		{"neither", `{}`, policies.EnvDecision{}, `answer has neither an "env" object nor "deny": {}`},
		{"a null env", `{"env":null}`, policies.EnvDecision{}, `answer has neither an "env" object nor "deny"`},
		{"an empty refusal", `{"deny":""}`, policies.EnvDecision{}, "answer denies with an empty reason"},
		{"a name with =", `{"env":{"A=B":"x"}}`, policies.EnvDecision{}, `answer sets "A=B", which is not a valid environment variable`},
		{"an empty name", `{"env":{"":"x"}}`, policies.EnvDecision{}, `answer sets "", which is not a valid environment variable`},
		{"an unknown member", `{"env":{},"note":"x"}`, policies.EnvDecision{}, `answer has an unknown member "note"; want env or deny`},
		{"a permission answer", `{"decision":"allow"}`, policies.EnvDecision{}, `answer has an unknown member "decision"`},
	}
	h := wasmHost(t)
	m := loadModule(t, h, hostile+"answer.wasm", wasm.Limits{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := wasmpolicy.NewEnv(m, "", map[string]any{"answer": json.RawMessage(c.answer)})
			d, err := e.DecideEnv(context.Background(), envRequest(map[string]string{"HOME": "/h"}, nil))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "policy module ../../wasm/testdata/answer.wasm") {
					t.Fatalf("DecideEnv = %+v, %v; want an error naming the module and containing %q", d, err, c.err)
				}
				return
			}
			c.want.Rule = "answer.wasm"
			if err != nil || !maps.Equal(d.Env, c.want.Env) || (d.Env == nil) != (c.want.Env == nil) || d.Deny != c.want.Deny || d.Rule != c.want.Rule {
				t.Errorf("DecideEnv = %+v, %v; want %+v", d, err, c.want)
			}
		})
	}
}

func TestWASMEnvFailsClosedOnAFailingModule(t *testing.T) {
	h := wasmHost(t)
	for _, file := range []string{"trap.wasm", "exit1.wasm", "badjson.wasm"} {
		e := wasmpolicy.NewEnv(loadModule(t, h, hostile+file, wasm.Limits{}), "", nil)
		d, err := e.DecideEnv(context.Background(), envRequest(map[string]string{"HOME": "/h"}, nil))
		if err == nil || !strings.HasPrefix(err.Error(), "policy module ../../wasm/testdata/"+file) || d.Env != nil || d.Rule != file {
			t.Errorf("%s: DecideEnv = %+v, %v; want an error naming the module and no environment", file, d, err)
		}
	}
}

// Importing the package registers the form: ParsePermission and ParseEnv
// load `wasm:` policies with it.
func TestTheRegisteredLoaderMakesPoliciesFromTheWorkflowsForm(t *testing.T) {
	ctx := context.Background()
	perm, err := policies.ParsePermission(map[string]any{"wasm": "c.wasm", "config": map[string]any{"team": "x"}}, prebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := perm.DecidePermission(ctx, permissionRequest("read", "")); err != nil || v.Decision != policies.Allow || v.Rule != "c.wasm" {
		t.Errorf("DecidePermission = %+v, %v; want allow by c.wasm", v, err)
	}

	env, err := policies.ParseEnv(map[string]any{"wasm": "wat.wasm", "limits": map[string]any{"memory": "1MiB", "timeout": "2s"}}, prebuilt)
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.DecideEnv(ctx, envRequest(map[string]string{"HOME": "/h", "AWS_REGION": "x"}, nil))
	if want := map[string]string{"HOME": "/h"}; err != nil || !maps.Equal(d.Env, want) || d.Rule != "wat.wasm" {
		t.Errorf("DecideEnv = %+v, %v; want %v by wat.wasm", d, err, want)
	}

	// A file that is not a module fails when the workflow is loaded, not at
	// the first decision.
	_, err = policies.ParsePermission(map[string]any{"wasm": "notwasm.wasm"}, hostile)
	if err == nil || !strings.Contains(err.Error(), "notwasm.wasm: not a WASM module") {
		t.Errorf("ParsePermission(notwasm.wasm) = %v, want the load error", err)
	}
}

func BenchmarkWASMPermission(b *testing.B) {
	h := wasmHost(b)
	for _, file := range []string{"c.wasm", "assemblyscript.wasm", "c-reactor.wasm", "wat.wasm"} {
		b.Run(strings.TrimSuffix(file, ".wasm"), func(b *testing.B) {
			p := wasmpolicy.NewPermission(loadModule(b, h, prebuilt+file, wasm.Limits{}), "", nil)
			req := permissionRequest("execute", "make && rm -rf x", policies.ToolLocation{Path: "/ws/a", InWorkspace: true})
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if v, err := p.DecidePermission(ctx, req); err != nil || v.Decision != policies.Reject {
					b.Fatal(v, err)
				}
			}
		})
	}
}

func ExampleNewPermission() {
	ctx := context.Background()
	host, err := wasm.NewHost(ctx) // one per process
	if err != nil {
		panic(err)
	}
	defer host.Close(ctx)
	module, err := host.Load(ctx, filepath.Join("..", "..", "wasm", "examples", "prebuilt", "c.wasm"), wasm.Limits{})
	if err != nil {
		panic(err)
	}
	policy := wasmpolicy.NewPermission(module, "", nil)
	req := &policies.PermissionRequest{
		Tool:    policies.Tool{ID: "call_1", Kind: "execute", Command: "make && rm -rf build"},
		Options: []policies.Option{{ID: "a1", Kind: "allow_once"}, {ID: "r1", Kind: "reject_once"}},
	}
	rec := policies.Answer(ctx, policy, policies.SourceWorkflow, req)
	fmt.Println(rec.Decision, rec.OptionID, rec.Rule, rec.Reason)
	// Output: reject r1 c.wasm destructive or networked command
}

// An env module is sent every ambient value; what it says is recorded
// (policy_stderr, the step's error, the reason to deny) and must carry no
// value that the built-in rules drop, nor any credential's value.
func TestWASMEnvRecordsNoSecretValue(t *testing.T) {
	ambient := map[string]string{
		"HOME": "/home/visible", "PATH": "/usr/visible/bin",
		"AWS_SECRET_ACCESS_KEY": "aws-secret-0001", "GH_TOKEN": "ghp_secret0002", "DATABASE_URL": "postgres://u:secret0003@db",
		"ANTHROPIC_API_KEY": "sk-ant-secret0004", "ACPFLOW_STORE": "/acpflow/secret0005", "MY_PASSWORD": `hunter2"secret0006\`,
		"NPM_CONFIG__AUTH": "npm-secret0007", "SENTRY_DSN": "https://secret0008@sentry",
		"SHORT_TOKEN": "abc", // too short to be scrubbed: it is left alone
	}
	explicit := map[string]string{"CODEX_API_KEY": "sk-explicit-secret0009", "MODE": "fast-visible"}
	secrets := []string{"aws-secret-0001", "ghp_secret0002", "secret0003", "sk-ant-secret0004", "secret0005", "secret0006", "secret0007", "secret0008", "secret0009"}
	visible := []string{"/home/visible", "/usr/visible/bin", "fast-visible"}
	h := wasmHost(t)
	check := func(t *testing.T, what, text string, wantVisible bool) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s carries the secret %q:\n%s", what, s, text)
			}
		}
		if !wantVisible {
			return
		}
		for _, v := range visible {
			if !strings.Contains(text, v) {
				t.Errorf("%s lost %q, which the child gets anyway:\n%s", what, v, text)
			}
		}
		if !strings.Contains(text, "[value of AWS_SECRET_ACCESS_KEY]") {
			t.Errorf("%s does not say whose value was scrubbed:\n%s", what, text)
		}
	}

	t.Run("stderr and the error quoting it", func(t *testing.T) {
		e := wasmpolicy.NewEnv(loadModule(t, h, hostile+"tattle.wasm", wasm.Limits{}), "", nil)
		d, err := e.DecideEnv(context.Background(), envRequest(ambient, explicit))
		if err == nil || !strings.Contains(err.Error(), "exited with code 1 (stderr: ") {
			t.Fatalf("DecideEnv = %+v, %v; want the module's exit, quoting its stderr", d, err)
		}
		check(t, "policy_stderr", d.Stderr, true)
		check(t, "the error", err.Error(), false)
	})
	m := loadModule(t, h, hostile+"answer.wasm", wasm.Limits{})
	for _, answer := range []string{
		`{"deny":"GH_TOKEN is ghp_secret0002, AWS is aws-secret-0001"}`, // the reason to deny
		`"sk-ant-secret0004 and sk-explicit-secret0009"`,                // an answer quoted in the error
		`"hunter2\"secret0006\\"`,                                       // and one escaped twice there
		`{"env":{"X":"secret0005"},"extra":"secret0006"}`,
	} {
		t.Run(answer, func(t *testing.T) {
			e := wasmpolicy.NewEnv(m, "", map[string]any{"answer": json.RawMessage(answer)})
			d, err := e.DecideEnv(context.Background(), envRequest(ambient, explicit))
			if err != nil {
				check(t, "the error", err.Error(), false)
			}
			check(t, "the reason to deny", d.Deny, false)
			if err == nil && d.Deny == "" {
				t.Errorf("DecideEnv = %+v, want a refusal or an error", d)
			}
		})
	}
	t.Run("a cancelled call is still known as cancelled", func(t *testing.T) {
		e := wasmpolicy.NewEnv(loadModule(t, h, hostile+"loop.wasm", wasm.Limits{}), "", nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := e.DecideEnv(ctx, envRequest(ambient, explicit)); !errors.Is(err, context.Canceled) {
			t.Errorf("DecideEnv = %v, want it to be context.Canceled", err)
		}
	})
}

func TestAWASMOuterEnvPolicyIsACeiling(t *testing.T) {
	h := wasmHost(t)
	outer := policies.Outer{{File: "/etc/acpflow/policy.yaml", Env: wasmpolicy.NewEnv(loadModule(t, h, prebuilt+"c.wasm", wasm.Limits{}), "", nil)}}
	// The workflow's own policy keeps every credential: the module's
	// answer is still the ceiling.
	workflow := &policies.EnvRules{Inherit: policies.InheritAll}
	ambient := map[string]string{"HOME": "/home/u", "PATH": "/usr/bin", "AWS_REGION": "eu-west-1", "GITHUB_TOKEN": "ghp_ambient"}

	d, err := outer.BuildEnv(context.Background(), workflow, envRequest(ambient, map[string]string{"CODEX_API_KEY": "sk-explicit"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"HOME": "/home/u", "PATH": "/usr/bin", "CODEX_API_KEY": "sk-explicit"}
	if !maps.Equal(d.Env, want) || len(d.Outer) != 1 || d.Outer[0].Rule != "c.wasm" {
		t.Errorf("BuildEnv = %+v, want env %v after c.wasm", d, want)
	}

	// An explicit AWS_* the module leaves out refuses the spawn.
	_, err = outer.BuildEnv(context.Background(), workflow, envRequest(ambient, map[string]string{"AWS_PROFILE": "prod-profile-secret"}))
	var refused *policies.OuterEnvError
	if !errors.As(err, &refused) || refused.Var != "AWS_PROFILE" || refused.Rule != "c.wasm" || strings.Contains(err.Error(), "prod-profile-secret") {
		t.Errorf("error %v, want the outer module refusing AWS_PROFILE", err)
	}

	// Its deny refuses the spawn, naming the layer.
	_, err = outer.BuildEnv(context.Background(), workflow, envRequest(map[string]string{"PATH": "/usr/bin"}, nil))
	if !errors.As(err, &refused) || err.Error() != "outer policy (/etc/acpflow/policy.yaml) refused the spawn (rule c.wasm): no HOME" {
		t.Errorf("error %v, want the outer module's deny", err)
	}
}
