package flow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/engine"
	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/policies"
	_ "github.com/acpflow/acpflow/policies/wasmpolicy"
	"github.com/acpflow/acpflow/steps"
	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	"github.com/acpflow/acpflow/temporal/builtin"
	"github.com/acpflow/acpflow/workflows"
)

var testAgent string // internal/testagent, built for the tests

func TestMain(m *testing.M) {
	// The demo agent is this binary started again (builtin: demo).
	if served, code := builtin.Serve(os.Args[1:]); served {
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "acpflow-temporal-")
	if err != nil {
		panic(err)
	}
	testAgent = filepath.Join(dir, "testagent")
	if err := agentrecord.Build(testAgent); err != nil {
		panic("building the test agent: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is one workflow file, loaded, with what both engines need.
type fixture struct {
	dir    string
	path   string
	wf     *engine.Workflow
	blobs  Blobs
	inputs map[string]any
	// attempts counts the activities in flight: the in-memory Temporal may
	// complete a cancelled workflow before its activities return.
	attempts sync.WaitGroup
	// signalled, when set, is told each signal an activity sends.
	signalled func(name string, arg any)
}

// settle waits until every activity has returned: then the agents they
// started must be gone.
func (f *fixture) settle(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { f.attempts.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("an activity did not return within a minute")
	}
}

func newFixture(t *testing.T, src string, given map[string]any) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir(), src, nil, given)
}

// newFixtureIn writes the workflow file in dir, and files beside it (by
// paths relative to dir).
func newFixtureIn(t *testing.T, dir, src string, files map[string][]byte, given map[string]any) *fixture {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "wf.yaml")
	src = strings.ReplaceAll(src, "TESTAGENT", testAgent)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := workflows.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := workflows.ResolveInputs(wf, given)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dir: dir, path: path, wf: wf, blobs: Blobs{Dir: filepath.Join(dir, "blobs")}, inputs: inputs}
}

func (f *fixture) request(t *testing.T, runID string) Request {
	t.Helper()
	b, err := NewBundle(f.blobs, f.path, f.wf)
	if err != nil {
		t.Fatal(err)
	}
	// A short heartbeat: the in-memory Temporal tells an activity it is
	// cancelled only when it beats. Not shorter than 5 s: the SDK sends
	// the beats of a window of 80% of the timeout together, and the
	// in-memory Temporal times an activity out (in real time) once a beat
	// is overdue; at 2 s a loaded machine had 0.4 s to deliver each window.
	return Request{RunID: runID, Bundle: b, Plan: PlanOf(f.wf), Workspace: f.dir, Inputs: f.inputs, Env: EnvFor(f.wf, policies.EnvMap(os.Environ())), Heartbeat: 5 * time.Second}
}

// environment is an in-memory Temporal with the workflow and the real
// activity registered: the activity spawns real agents.
func (f *fixture) environment(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	in := &Interpreter{Blobs: f.blobs}
	env.RegisterWorkflowWithOptions(in.Interpret, workflow.RegisterOptions{Name: WorkflowName})
	acts := &Activities{Blobs: f.blobs, Cache: filepath.Join(f.dir, "cache"), Ambient: policies.EnvMap(os.Environ()), Signal: signalIn(env), Query: queryIn(env)}
	if f.signalled != nil {
		acts.Signal = tapSignals(acts.Signal, f.signalled)
	}
	attempt := func(ctx context.Context, task Task) (Stored, error) {
		f.attempts.Add(1)
		defer f.attempts.Done()
		return acts.Attempt(ctx, task)
	}
	env.RegisterActivityWithOptions(attempt, activity.RegisterOptions{Name: ActivityName})
	env.SetTestTimeout(2 * time.Minute)
	return env
}

// onTemporal runs the fixture's workflow in the in-memory Temporal.
func (f *fixture) onTemporal(t *testing.T) *engine.RunResult {
	t.Helper()
	env := f.environment(t)
	env.ExecuteWorkflow(WorkflowName, f.request(t, "r1"))
	return f.result(t, env)
}

func (f *fixture) result(t *testing.T, env *testsuite.TestWorkflowEnvironment) *engine.RunResult {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var out Outcome
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	res, err := out.Result(f.blobs, f.dir)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// onCLI runs the same workflow with the CLI's engine.
func (f *fixture) onCLI(t *testing.T) *engine.RunResult {
	t.Helper()
	return engine.Run(context.Background(), f.wf, engine.Options{
		RunID: "r1", Workspace: f.dir, Inputs: f.inputs, Ambient: policies.EnvMap(os.Environ()),
		RetryBackoff: time.Millisecond,
	})
}

// comparable is what must be equal between the CLI and Temporal: status,
// error, outputs and each step's status, stop reason, output, final,
// value, error, attempts and permission decisions (not its timing nor
// session id).
func comparable(res *engine.RunResult) map[string]any {
	stepsOf := map[string]any{}
	for id, st := range res.Steps {
		var decisions []string
		for _, p := range st.Permissions {
			decisions = append(decisions, string(p.Decision)+" "+p.Title)
		}
		stepsOf[id] = []any{st.Status, st.StopReason, st.Output, st.Final, st.JSON, st.Error, st.Attempts, decisions}
	}
	outputs, _ := json.Marshal(res.Outputs)
	return map[string]any{"status": res.Status, "error": res.Error, "outputs": string(outputs), "steps": stepsOf}
}

func sameAsCLI(t *testing.T, f *fixture) *engine.RunResult {
	t.Helper()
	cli := f.onCLI(t)
	tmp := f.onTemporal(t)
	if got, want := comparable(tmp), comparable(cli); !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("on Temporal:\n%s\non the CLI:\n%s", g, w)
	}
	return tmp
}

// dagWorkflow has needs, an if: true and false, a skip that spreads, a
// for-each with its own max-parallel, and outputs.
const dagWorkflow = `name: dag
inputs:
  topic: {type: string, default: tests}
agents:
  demo: {builtin: demo}
max-parallel: 2
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "plan ${{ inputs.topic }}"}}
  - id: yes
    needs: [plan]
    if: steps.plan.status == "succeeded"
    uses: acp-subagent
    with: {agent: demo, prompt: "after ${{ steps.plan.final }}"}
  - id: no
    needs: [plan]
    if: inputs.topic == "never"
    uses: acp-subagent
    with: {agent: demo, prompt: "never"}
  - id: after_no
    needs: [no]
    uses: acp-subagent
    with: {agent: demo, prompt: "never either"}
  - id: each
    needs: [yes]
    for-each: '["a", "b", "c"]'
    max-parallel: 2
    uses: acp-subagent
    with: {agent: demo, prompt: "item ${{ item }} at ${{ index }}"}
outputs:
  first: ${{ steps.plan.final }}
  items: ${{ steps.each.final }}
`

// retriesWorkflow has a step that fails after its retries and cancels
// the run, a step cancelled by it, one never started, and one that fails
// alone (continue-on-error). TESTAGENT and REC are the test agent and its
// record file.
const retriesWorkflow = `name: retries
agents:
  refuses: {command: TESTAGENT, args: [-stop, refusal, -record, REC]}
  slow: {command: TESTAGENT, args: [-prompt-delay, 30s, -record, REC]}
  demo: {builtin: demo}
max-parallel: 4
steps:
  - {id: flaky, uses: acp-subagent, retries: 2, with: {agent: refuses, prompt: "try"}}
  - {id: slow, uses: acp-subagent, with: {agent: slow, prompt: "wait"}}
  - {id: later, needs: [flaky], uses: acp-subagent, with: {agent: demo, prompt: "never"}}
  - {id: tolerant, uses: acp-subagent, continue-on-error: true, with: {agent: refuses, prompt: "fails alone"}}
`

func TestADAGWithIfAndForEachEndsOnTemporalAsOnTheCLI(t *testing.T) {
	f := newFixture(t, dagWorkflow, nil)
	res := sameAsCLI(t, f)
	if res.Status != engine.StatusSucceeded || res.Steps["no"].Status != engine.StatusSkipped || res.Steps["after_no"].Status != engine.StatusSkipped {
		t.Errorf("status %s, no %s, after_no %s", res.Status, res.Steps["no"].Status, res.Steps["after_no"].Status)
	}
	if items, _ := res.Steps["each"].Final.([]any); len(items) != 3 || !strings.Contains(fmt.Sprint(items[2]), "item c at 2") {
		t.Errorf("each: %v", res.Steps["each"].Final)
	}
}

func TestAFailedStepIsRetriedAndCancelsTheRunAsOnTheCLI(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	f := newFixture(t, strings.ReplaceAll(retriesWorkflow, "REC", rec), nil)
	res := sameAsCLI(t, f)
	if st := res.Steps["flaky"]; st.Status != engine.StatusFailed || st.Attempts != 3 {
		t.Errorf("flaky: %s after %d attempts, want failed after 3", st.Status, st.Attempts)
	}
	if st := res.Steps["slow"]; st.Status != engine.StatusCancelled {
		t.Errorf("slow: %s %q, want cancelled by the failed step", st.Status, st.Error)
	}
	f.settle(t)
	agentrecord.AssertGone(t, rec)
}

func TestCancellingARunTearsItsAgentDown(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	f := newFixture(t, `name: cancel
agents:
  hangs: {command: TESTAGENT, args: [-prompt-hang, -record, `+rec+`]}
steps:
  - {id: hang, uses: acp-subagent, with: {agent: hangs, prompt: "forever"}}
`, nil)
	env := f.environment(t)
	env.RegisterDelayedCallback(func() {
		waitForPrompt(t, rec)
		env.CancelWorkflow()
	}, time.Second)
	req := f.request(t, "r1")
	env.ExecuteWorkflow(WorkflowName, req)
	res := f.result(t, env)
	if res.Status != engine.StatusCancelled || res.Steps["hang"].Status != engine.StatusCancelled {
		t.Errorf("run %s, step %s (%s): want both cancelled", res.Status, res.Steps["hang"].Status, res.Steps["hang"].Error)
	}
	f.settle(t)
	agentrecord.AssertGone(t, rec)
}

// waitForPrompt waits until the test agent has been sent a prompt.
func waitForPrompt(t *testing.T, rec string) {
	deadline := time.Now().Add(30 * time.Second)
	for len(agentrecord.Named(rec, "prompt")) == 0 {
		if time.Now().After(deadline) {
			t.Errorf("the agent was never prompted")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An output larger than a Temporal payload may hold travels by reference
// to a blob, and reads the same in the next step's prompt and the run's
// outputs.
func TestALargeOutputTravelsByReference(t *testing.T) {
	f := newFixture(t, `name: large
agents:
  big: {command: TESTAGENT, args: [-flood, "300", -flood-size, "1024", -no-chunks]}
  demo: {builtin: demo}
steps:
  - {id: big, uses: acp-subagent, with: {agent: big, prompt: "talk", max-output: 1MiB}}
  - {id: size, needs: [big], uses: acp-subagent, with: {agent: demo, prompt: "${{ len(steps.big.output) }}"}}
outputs:
  size: ${{ len(steps.big.output) }}
`, nil)
	res := sameAsCLI(t, f)
	if res.Outputs["size"] != "307200" {
		t.Errorf("outputs.size = %v, want 307200", res.Outputs["size"])
	}
	ents, _ := os.ReadDir(f.blobs.Dir)
	refs := 0
	for _, e := range ents {
		if fi, _ := e.Info(); fi.Size() > inlineMax {
			refs++
		}
	}
	if refs == 0 {
		t.Error("no step result went to the blob store")
	}
}

// A worker that fails an attempt (it died, lost the server) is not the
// step failing: the attempt is given to a worker again, and the step
// succeeds with one attempt of its own.
func TestAWorkersFailureIsRetriedWithoutCountingAsAStepsAttempt(t *testing.T) {
	f := newFixture(t, `name: lost
agents:
  demo: {builtin: demo}
steps:
  - {id: once, uses: acp-subagent, with: {agent: demo, prompt: "hi"}}
`, nil)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	in := &Interpreter{Blobs: f.blobs}
	env.RegisterWorkflowWithOptions(in.Interpret, workflow.RegisterOptions{Name: WorkflowName})
	acts := &Activities{Blobs: f.blobs, Cache: filepath.Join(f.dir, "cache"), Ambient: policies.EnvMap(os.Environ()), Signal: signalIn(env)}
	calls := 0
	env.RegisterActivityWithOptions(func(ctx context.Context, task Task) (Stored, error) {
		calls++
		if calls == 1 {
			return Stored{}, errors.New("worker lost")
		}
		return acts.Attempt(ctx, task)
	}, activity.RegisterOptions{Name: ActivityName})
	env.ExecuteWorkflow(WorkflowName, f.request(t, "r1"))
	res := f.result(t, env)
	if st := res.Steps["once"]; res.Status != engine.StatusSucceeded || st.Attempts != 1 || calls != 2 {
		t.Errorf("run %s, step attempts %d, activity calls %d: want succeeded, 1, 2", res.Status, st.Attempts, calls)
	}
}

// A step that continues an earlier step's session (session:) runs on a
// fresh agent on whatever worker takes it: it continues through the
// agent's session/load, as the CLI does after a resume.
func TestASessionIsContinuedOnAFreshAgent(t *testing.T) {
	f := newFixture(t, `name: session
agents:
  demo: {builtin: demo}
steps:
  - {id: plan, uses: acp-subagent, with: {agent: demo, prompt: "remember the plan"}}
  - {id: build, needs: [plan], uses: acp-subagent, with: {agent: demo, prompt: "build it", session: plan}}
`, nil)
	res := f.onTemporal(t)
	plan, build := res.Steps["plan"], res.Steps["build"]
	if res.Status != engine.StatusSucceeded || build.SessionID != plan.SessionID {
		t.Fatalf("run %s (%s); plan session %q, build session %q (%s)", res.Status, res.Error, plan.SessionID, build.SessionID, build.Error)
	}
	if !strings.Contains(fmt.Sprint(build.Final), "remembers 1 earlier prompt: remember the plan") {
		t.Errorf("build did not continue plan's conversation: %v", build.Final)
	}
}

// budgetWorkflow spends 1,000 tokens a step against a budget of 1,500,
// with a slow step beside; TESTAGENT and REC as in retriesWorkflow.
const budgetWorkflow = `name: spend
budget: {tokens: 1500}
agents:
  spends: {command: TESTAGENT, args: [-usage-tokens, "1000", -record, REC]}
  slow: {command: TESTAGENT, args: [-prompt-delay, 30s, -record, REC]}
max-parallel: 4
steps:
  - {id: first, uses: acp-subagent, with: {agent: spends, prompt: "one"}}
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: spends, prompt: "two"}}
  - {id: third, needs: [second], uses: acp-subagent, with: {agent: spends, prompt: "three"}}
  - {id: slow, uses: acp-subagent, with: {agent: slow, prompt: "wait"}}
`

// A run's budget: — its settled steps' usage summed, and each attempt's
// own live usage against what the others spent — stops the run on
// Temporal as on the CLI: the step in flight cancelled with the budget's
// words, the next not started, the run failed.
func TestABudgetStopsTheRunAsOnTheCLI(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	f := newFixture(t, strings.NewReplacer("TESTAGENT", testAgent, "REC", rec).Replace(budgetWorkflow), nil)
	res := sameAsCLI(t, f)
	if res.Status != engine.StatusFailed || !strings.Contains(res.Error, "budget exceeded: 2,000 tokens of 1,500") {
		t.Errorf("run %s %q, want failed over its budget", res.Status, res.Error)
	}
	if st := res.Steps["slow"]; st.Status != engine.StatusCancelled || !strings.Contains(st.Error, "budget exceeded") {
		t.Errorf("slow: %s %q", st.Status, st.Error)
	}
	f.settle(t)
	agentrecord.AssertGone(t, rec)
}

// Many results, each small enough to go inline, do not make one payload
// too large together: the largest go by reference.
func TestManyResultsTogetherStayWithinAPayload(t *testing.T) {
	b := Blobs{Dir: t.TempDir()}
	m := map[string]Stored{}
	for i := 0; i < 12; i++ {
		m[fmt.Sprintf("s%02d", i)] = Stored{Result: &engine.StepResult{Output: strings.Repeat("x", 200<<10)}}
	}
	m["small"] = Stored{Result: &engine.StepResult{Output: "ok"}}
	if err := b.shrink(m); err != nil {
		t.Fatal(err)
	}
	inline, total := 0, 0
	for id, st := range m {
		if st.Result != nil {
			inline++
			data, _ := json.Marshal(st.Result)
			total += len(data)
		}
		res, err := b.Load(st)
		if err != nil || (id != "small" && len(res.Output.(string)) != 200<<10) {
			t.Errorf("%s: %v", id, err)
		}
	}
	if total > payloadMax || m["small"].Result == nil {
		t.Errorf("%d inline results of %d bytes; want at most %d, the small one inline", inline, total, payloadMax)
	}
}

// A WASM policy travels to the worker by content hash, placed where the
// file names it (here up one directory), and decides there as on the CLI.
func TestAWASMPolicyTravelsToTheWorkerByHash(t *testing.T) {
	module, err := os.ReadFile(filepath.Join("..", "..", "wasm", "examples", "prebuilt", "c.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureIn(t, filepath.Join(t.TempDir(), "flows"), `name: strict
agents:
  a: {command: TESTAGENT, args: [-no-chunks, -permission, "read:/etc/hosts", -permission, "execute:make && rm -rf x"]}
policies:
  permission: {wasm: ../policies/c.wasm}
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: hi}}
`, map[string][]byte{"../policies/c.wasm": module}, nil)
	req := f.request(t, "r1")
	if len(req.Bundle.Modules) != 1 || req.Bundle.Modules["../policies/c.wasm"] == "" {
		t.Fatalf("bundle modules %v", req.Bundle.Modules)
	}
	res := sameAsCLI(t, f)
	var got []string
	for _, p := range res.Steps["s"].Permissions {
		got = append(got, string(p.Decision)+" by "+p.Rule)
	}
	if strings.Join(got, ", ") != "allow by c.wasm, reject by c.wasm" {
		t.Errorf("decisions %v", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "cache")); err != nil {
		t.Errorf("the worker unpacked nothing: %v", err)
	}
}

// The run's events (EventsQuery) are the CLI's run_start, step_start,
// step_update retry and element_end, step_end and run_end: the same ones,
// for the same steps and for-each elements (each with its index).
func TestTheRunsEventsAreTheCLIs(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	for name, src := range map[string]string{"dag": dagWorkflow, "retries": strings.ReplaceAll(retriesWorkflow, "REC", rec)} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, src, nil)
			var sink collect
			engine.Run(context.Background(), f.wf, engine.Options{
				RunID: "r1", Workspace: f.dir, Inputs: f.inputs, Events: &sink, RetryBackoff: time.Millisecond,
			})
			var cli []string
			for _, e := range sink.events {
				line, _ := json.Marshal(e)
				if k := eventKey(line); k != "" {
					cli = append(cli, k)
				}
			}
			env := f.environment(t)
			env.ExecuteWorkflow(WorkflowName, f.request(t, "r1"))
			f.result(t, env)
			v, err := env.QueryWorkflow(EventsQuery, 0)
			if err != nil {
				t.Fatal(err)
			}
			var lines []json.RawMessage
			if err := v.Get(&lines); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range lines {
				got = append(got, eventKey(l))
			}
			if got[0] != "run_start " || got[len(got)-1] != "run_end  succeeded" && got[len(got)-1] != "run_end  failed" {
				t.Errorf("events begin with %q and end with %q", got[0], got[len(got)-1])
			}
			slices.Sort(got)
			slices.Sort(cli)
			if !slices.Equal(got, cli) {
				t.Errorf("on Temporal:\n%s\non the CLI:\n%s", strings.Join(got, "\n"), strings.Join(cli, "\n"))
			}
			if name == "dag" && !slices.Contains(got, "element_end each#2 succeeded") {
				t.Errorf("no element_end of each's element 2 on Temporal:\n%s", strings.Join(got, "\n"))
			}
			f.settle(t)
		})
	}
	agentrecord.AssertGone(t, rec)
}

// collect is a steps.Sink that keeps every event.
type collect struct {
	mu     sync.Mutex
	events []steps.Event
}

func (c *collect) Emit(e steps.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

// eventKey is what must agree of an event: its type, step, element index,
// attempt and status; "" for the events that happen inside a turn.
func eventKey(line []byte) string {
	var e struct {
		Type, Step, Status, Kind string
		Index                    *int
		Attempt                  int
	}
	json.Unmarshal(line, &e)
	if e.Type == "step_update" && (e.Kind == "retry" || e.Kind == "element_end") {
		e.Type = e.Kind
	}
	switch e.Type {
	case "run_start", "step_start", "retry", "element_end", "step_end", "run_end":
		k := e.Type + " " + e.Step
		if e.Index != nil {
			k += fmt.Sprintf("#%d", *e.Index)
		}
		if e.Attempt > 0 {
			k += fmt.Sprintf(" attempt %d", e.Attempt)
		}
		if e.Status != "" {
			k += " " + e.Status
		}
		return k
	}
	return ""
}

// EventsQuery answers at most MaxEventsPerQuery events at a time, from
// where the caller is, and refuses an index past the end.
func TestTheEventsQueryAnswersInPages(t *testing.T) {
	s := &scheduler{}
	for i := 0; i < 2*MaxEventsPerQuery+7; i++ {
		s.events = append(s.events, []byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	var sizes []int
	for from := 0; ; {
		page, err := s.eventsFrom(from)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page))
		if len(page) > 0 && string(page[0]) != fmt.Sprintf(`{"n":%d}`, from) {
			t.Fatalf("the page from %d begins with %s", from, page[0])
		}
		from += len(page)
		if len(page) < MaxEventsPerQuery {
			break
		}
	}
	if fmt.Sprint(sizes) != fmt.Sprint([]int{MaxEventsPerQuery, MaxEventsPerQuery, 7}) {
		t.Errorf("pages of %v", sizes)
	}
	if _, err := s.eventsFrom(len(s.events) + 1); err == nil {
		t.Error("an index past the end was answered")
	}
}

// A run that would make more attempts than its history can hold fails
// the attempt past the bound, saying so, and the run goes on to its end.
func TestAttemptsPastTheBoundFailSayingSo(t *testing.T) {
	saved := maxAttempts
	maxAttempts = 2
	t.Cleanup(func() { maxAttempts = saved })
	f := newFixture(t, `name: many
agents:
  demo: {builtin: demo}
steps:
  - id: each
    for-each: '[1, 2, 3]'
    max-parallel: 1
    uses: acp-subagent
    with: {agent: demo, prompt: "item ${{ item }}"}
`, nil)
	res := f.onTemporal(t)
	st := res.Steps["each"]
	if res.Status != engine.StatusFailed || !strings.Contains(st.Error, "item 2: the run has made 2 attempts") {
		t.Errorf("run %s, each %s: %q", res.Status, st.Status, st.Error)
	}
	f.settle(t)
}

// A bundle whose file name is a path (from a client that is not ours) is
// refused before anything is written.
func TestABundleWithAPathForAFileNameIsRefused(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"../../escape.yaml", "a/b.yaml", "..", ""} {
		_, err := Bundle{Name: name, Source: "sha256:" + strings.Repeat("0", 64)}.unpack(Blobs{Dir: dir}, filepath.Join(dir, "cache"))
		if err == nil || !strings.Contains(err.Error(), "is not a file name") {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// A worker keeps at most maxLoaded workflows loaded, the oldest going
// first, and loads one again when it comes back.
func TestAWorkerKeepsABoundedNumberOfWorkflowsLoaded(t *testing.T) {
	dir := t.TempDir()
	blobs := Blobs{Dir: filepath.Join(dir, "blobs")}
	acts := &Activities{Blobs: blobs, Cache: filepath.Join(dir, "cache")}
	var first Bundle
	for i := 0; i <= maxLoaded; i++ {
		f := newFixture(t, fmt.Sprintf("name: w%d\nagents:\n  demo: {builtin: demo}\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: hi}}\n", i), nil)
		b, err := NewBundle(blobs, f.path, f.wf)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		}
		if _, err := acts.workflow(b); err != nil {
			t.Fatal(err)
		}
	}
	if len(acts.loaded) != maxLoaded || acts.loaded[first.key()] != nil {
		t.Errorf("%d loaded, the first still among them: %v", len(acts.loaded), acts.loaded[first.key()] != nil)
	}
	if wf, err := acts.workflow(first); err != nil || wf.Name != "w0" {
		t.Errorf("the first again: %v, %v", wf, err)
	}
}

// A sandboxed agent is confined on a worker as on the CLI: the worker
// starts it through its own executable's launcher, and the step's result
// says what was enforced.
func TestASandboxedAgentIsConfinedOnAWorkerAsOnTheCLI(t *testing.T) {
	f := newFixture(t, `name: sandboxed
sandbox: {network: off}
agents:
  demo: {builtin: demo}
steps:
  - {id: s, uses: acp-subagent, with: {agent: demo, prompt: "hello"}}
`, nil)
	res := sameAsCLI(t, f)
	sb := res.Steps["s"].Sandbox
	if res.Status != engine.StatusSucceeded || sb == nil || !sb.Enforced || sb.Network != "off" || sb.LandlockABI == 0 {
		t.Fatalf("status %s, sandbox %+v: want succeeded, enforced, network off", res.Status, sb)
	}
}

// A gateway runs beside the activity, on the worker, and takes its key
// from the worker's environment, as with: templates do: the key never
// travels through Temporal, the provider gets it, and the step's usage is
// the provider's, as on the CLI.
func TestAGatewayRunsOnTheWorkerWithTheWorkersKey(t *testing.T) {
	key := "sk-canary-" + rand.Text()
	t.Setenv("GW_TEMPORAL_KEY", key)
	var mu sync.Mutex
	var got []string
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",`+
			`"content":[{"type":"text","text":"from the provider"}],"stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":3}}`)
	}))
	defer prov.Close()
	f := newFixture(t, `name: gw
agents:
  caller:
    command: TESTAGENT
    args: ["-no-chunks", "-call-model", "1"]
    gateway:
      key: ${{ env.GW_TEMPORAL_KEY }}
      upstream: `+prov.URL+`
      api: anthropic
      base-url-env: ANTHROPIC_BASE_URL
      key-env: ANTHROPIC_API_KEY
steps:
  - {id: ask, uses: acp-subagent, with: {agent: caller, prompt: "hi"}}
`, nil)
	res := sameAsCLI(t, f)
	u := res.Steps["ask"].Usage
	if res.Status != engine.StatusSucceeded || u == nil || u.Source != "gateway" || u.InputTokens == nil || *u.InputTokens != 7 {
		t.Fatalf("status %s, usage %+v: want succeeded, metered by the gateway (7 in)", res.Status, u)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != key || got[1] != key {
		t.Errorf("the provider got %d requests, keys right: %v; want 2 (CLI and worker) with the key", len(got), []bool{len(got) > 0 && got[0] == key, len(got) > 1 && got[1] == key})
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), key) {
		t.Error("the key is in the run's result")
	}
	f.settle(t)
}
