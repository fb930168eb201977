package engine_test

// Engine tests drive real workflows (parsed from YAML) with real agents
// (internal/testagent) over real pipes.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/steps"
	_ "github.com/acpflow/acpflow/steps/acpsubagent"
	"github.com/acpflow/acpflow/workflows"
)

var testAgent string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpflow-engine-")
	if err != nil {
		panic(err)
	}
	testAgent = filepath.Join(dir, "testagent")
	if err := record.Build(testAgent); err != nil {
		panic(err)
	}
	procgroup.EnableSubreaper()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sink records events with their times.
type sink struct {
	mu     sync.Mutex
	events []steps.Event
}

func (s *sink) Emit(e steps.Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// times returns when each step started (its first step_start) and ended.
func (s *sink) times() (start, end map[string]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start, end = map[string]time.Time{}, map[string]time.Time{}
	for _, e := range s.events {
		switch e.Data.(type) {
		case steps.StepStart:
			if _, ok := start[e.Step]; !ok {
				start[e.Step] = e.Time
			}
		case steps.StepEnd:
			end[e.Step] = e.Time
		}
	}
	return start, end
}

// run parses a workflow whose agents use the test agent (AGENT in the text
// is replaced by its path) and runs it.
func run(t *testing.T, yaml string, opt engine.Options) (*engine.RunResult, *sink) {
	t.Helper()
	yaml = strings.ReplaceAll(yaml, "AGENT", testAgent)
	wf, err := workflows.Parse("wf.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if opt.Inputs == nil {
		opt.Inputs, err = workflows.ResolveInputs(wf, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if opt.Workspace == "" {
		opt.Workspace = t.TempDir()
	}
	opt.Ambient = map[string]string{"PATH": os.Getenv("PATH")}
	if opt.RetryBackoff == 0 {
		opt.RetryBackoff = 10 * time.Millisecond
	}
	s := &sink{}
	opt.Events = s
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return engine.Run(ctx, wf, opt), s
}

func records(t *testing.T, path string) []map[string]any { return record.Read(path) }

func statuses(res *engine.RunResult) string {
	ids := make([]string, 0, len(res.Steps))
	for id := range res.Steps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s=%s ", id, res.Steps[id].Status)
	}
	return strings.TrimSpace(b.String())
}

func TestStepsRunInNeedsOrderAndOutputsFlowToDependants(t *testing.T) {
	res, s := run(t, `
name: order
agents:
  a: {command: AGENT, args: ["-chunk", "one"]}
  b: {command: AGENT, args: ["-chunk", "two"]}
steps:
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: b, prompt: "after ${{ steps.first.output }}"}}
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: go}}
outputs:
  both: "${{ steps.first.output }}+${{ steps.second.output }}"
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s: %s %s", res.Status, res.Error, statuses(res))
	}
	start, end := s.times()
	if !start["second"].After(end["first"]) {
		t.Errorf("second started at %v, before first ended at %v", start["second"], end["first"])
	}
	if res.Outputs["both"] != "one+two" {
		t.Errorf("outputs = %v", res.Outputs)
	}
}

func TestIndependentStepsOverlap(t *testing.T) {
	res, s := run(t, `
name: overlap
max-parallel: 2
agents:
  slow: {command: AGENT, args: ["-prompt-delay", "300ms"]}
steps:
  - {id: left, uses: acp-subagent, with: {agent: slow, prompt: l}}
  - {id: right, uses: acp-subagent, with: {agent: slow, prompt: r}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s: %s", res.Status, statuses(res))
	}
	start, end := s.times()
	// Each step's run overlaps the other's: both started before either ended.
	if !start["right"].Before(end["left"]) || !start["left"].Before(end["right"]) {
		t.Errorf("no overlap: left %v..%v right %v..%v", start["left"], end["left"], start["right"], end["right"])
	}
}

func TestMaxParallelOneSerialisesIndependentSteps(t *testing.T) {
	res, s := run(t, `
name: serial
max-parallel: 1
agents:
  slow: {command: AGENT, args: ["-prompt-delay", "100ms"]}
steps:
  - {id: left, uses: acp-subagent, with: {agent: slow, prompt: l}}
  - {id: right, uses: acp-subagent, with: {agent: slow, prompt: r}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s", res.Status)
	}
	start, end := s.times()
	first, second := "left", "right"
	if start["right"].Before(start["left"]) {
		first, second = second, first
	}
	if start[second].Before(end[first]) {
		t.Errorf("%s started at %v before %s ended at %v", second, start[second], first, end[first])
	}
}

func TestAFailedStepSkipsItsDependantsAndFailsTheRun(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "after.jsonl")
	res, _ := run(t, fmt.Sprintf(`
name: skip
agents:
  bad: {command: AGENT, args: ["-stop", "refusal"]}
  ok: {command: AGENT, args: ["-record", %q]}
steps:
  - {id: broken, uses: acp-subagent, with: {agent: bad, prompt: x}}
  - {id: after, needs: [broken], uses: acp-subagent, with: {agent: ok, prompt: y}}
  - {id: later, needs: [after], uses: acp-subagent, with: {agent: ok, prompt: z}}
`, rec), engine.Options{})
	if res.Status != engine.StatusFailed {
		t.Errorf("run status = %s", res.Status)
	}
	if got := statuses(res); got != "after=skipped broken=failed later=skipped" {
		t.Errorf("statuses = %s", got)
	}
	if res.Steps["broken"].StopReason != "refusal" {
		t.Errorf("stop reason = %s", res.Steps["broken"].StopReason)
	}
	if records(t, rec) != nil {
		t.Error("a skipped step spawned its agent")
	}
}

func TestContinueOnErrorLetsDependantsRunAndTheRunSucceed(t *testing.T) {
	res, _ := run(t, `
name: coe
agents:
  bad: {command: AGENT, args: ["-crash-on", "session/prompt"]}
  ok: {command: AGENT}
steps:
  - {id: flaky, continue-on-error: true, uses: acp-subagent, with: {agent: bad, prompt: x}}
  - {id: after, needs: [flaky], uses: acp-subagent, with: {agent: ok, prompt: "${{ steps.flaky.status }}"}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Errorf("run status = %s (%s)", res.Status, statuses(res))
	}
	if got := statuses(res); got != "after=succeeded flaky=failed" {
		t.Errorf("statuses = %s", got)
	}
}

func TestIfFalseSkips(t *testing.T) {
	res, _ := run(t, `
name: cond
inputs:
  go: {type: boolean, default: false}
agents:
  ok: {command: AGENT}
steps:
  - {id: maybe, if: inputs.go, uses: acp-subagent, with: {agent: ok, prompt: x}}
  - {id: always, uses: acp-subagent, with: {agent: ok, prompt: y}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded || statuses(res) != "always=succeeded maybe=skipped" {
		t.Errorf("run %s: %s", res.Status, statuses(res))
	}
}

// A step's status compares equal to its name: `steps.a.status ==
// "succeeded"` was false while the status was a named string type.
func TestAnIfOnAStepsStatusComparesItAsAString(t *testing.T) {
	res, _ := run(t, `
name: cond
agents:
  ok: {command: AGENT}
  bad: {command: AGENT, args: ["-stop", "refusal"]}
steps:
  - {id: first, uses: acp-subagent, with: {agent: ok, prompt: x}}
  - {id: worse, uses: acp-subagent, continue-on-error: true, with: {agent: bad, prompt: x}}
  - {id: after, needs: [first], if: 'steps.first.status == "succeeded"', uses: acp-subagent, with: {agent: ok, prompt: y}}
  - {id: mend, needs: [worse], if: 'steps.worse.status == "failed"', uses: acp-subagent, with: {agent: ok, prompt: y}}
  - {id: never, needs: [first], if: 'steps.first.status != "succeeded"', uses: acp-subagent, with: {agent: ok, prompt: y}}
`, engine.Options{})
	if got := statuses(res); got != "after=succeeded first=succeeded mend=succeeded never=skipped worse=failed" {
		t.Errorf("statuses = %s", got)
	}
}

func TestRetriesCountInAttempts(t *testing.T) {
	res, s := run(t, `
name: retry
agents:
  bad: {command: AGENT, args: ["-stop", "max_tokens"]}
steps:
  - {id: stubborn, retries: 2, uses: acp-subagent, with: {agent: bad, prompt: x}}
`, engine.Options{})
	st := res.Steps["stubborn"]
	if st.Status != engine.StatusFailed || st.Attempts != 3 || st.StopReason != "max-tokens" {
		t.Errorf("step = %+v", st)
	}
	n := 0
	for _, e := range s.events {
		if _, ok := e.Data.(steps.StepStart); ok {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d step_start events, want 3", n)
	}
}

func TestForEachKeepsItemOrderAndHonoursMaxParallel(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	res, _ := run(t, fmt.Sprintf(`
name: each
inputs:
  files: {type: array, default: ["c.go", "a.go", "b.go", "d.go"]}
agents:
  echo: {command: AGENT, args: ["-record", %q, "-prompt-delay", "150ms", "-chunk", "done"]}
steps:
  - id: review
    for-each: inputs.files
    max-parallel: 2
    uses: acp-subagent
    with: {agent: echo, prompt: "review ${{ item }} (#${{ index }})"}
`, rec), engine.Options{})
	st := res.Steps["review"]
	if st.Status != engine.StatusSucceeded {
		t.Fatalf("step = %+v", st)
	}
	out, ok := st.Output.([]any)
	if !ok || len(out) != 4 {
		t.Fatalf("output = %#v, want a list of 4", st.Output)
	}
	// The prompts prove which item each agent got; at most two at once.
	var prompts []string
	for _, r := range records(t, rec) {
		if r["event"] == "prompt" {
			prompts = append(prompts, record.PromptText(r))
		}
	}
	sort.Strings(prompts)
	if strings.Join(prompts, "|") != "review a.go (#1)|review b.go (#2)|review c.go (#0)|review d.go (#3)" {
		t.Errorf("prompts = %q", prompts)
	}
	// The record file is appended in time order: count agents alive
	// between their start and their exit.
	live, peak := 0, 0
	for _, r := range records(t, rec) {
		switch r["event"] {
		case "start":
			live++
		case "flushed":
			live--
		}
		peak = max(peak, live)
	}
	if peak > 2 || peak == 0 {
		t.Errorf("peak concurrency %d, want 1..2", peak)
	}
}

func TestStepTimeoutFailsTheStepAborted(t *testing.T) {
	res, _ := run(t, `
name: slow
agents:
  hang: {command: AGENT, args: ["-prompt-hang"]}
steps:
  - {id: stuck, timeout: 300ms, uses: acp-subagent, with: {agent: hang, prompt: x}}
`, engine.Options{})
	st := res.Steps["stuck"]
	if st.Status != engine.StatusFailed || st.StopReason != "aborted" || !strings.Contains(st.Error, "step timed out after 300ms") {
		t.Errorf("step = %+v", st)
	}
}

// The error names the run's timeout, which alone can end the hanging
// agent (the harness's own limit is a minute and says otherwise): no time
// is asserted, since the agent's start and teardown take what the machine
// gives them.
func TestRunTimeoutFailsTheRunAndCancelsItsSteps(t *testing.T) {
	res, _ := run(t, `
name: slow
agents:
  hang: {command: AGENT, args: ["-prompt-hang"]}
  ok: {command: AGENT}
steps:
  - {id: stuck, uses: acp-subagent, with: {agent: hang, prompt: x}}
  - {id: next, needs: [stuck], uses: acp-subagent, with: {agent: ok, prompt: y}}
`, engine.Options{Timeout: 400 * time.Millisecond})
	if res.Status != engine.StatusFailed || res.Error != "run timed out after 400ms" {
		t.Errorf("run = %s %q", res.Status, res.Error)
	}
	if got := statuses(res); got != "next=skipped stuck=cancelled" {
		t.Errorf("statuses = %s", got)
	}
}

func TestAFailedStepCancelsItsRunningSiblings(t *testing.T) {
	res, _ := run(t, `
name: sibling
agents:
  hang: {command: AGENT, args: ["-prompt-hang"]}
  bad: {command: AGENT, args: ["-prompt-delay", "200ms", "-stop", "refusal"]}
steps:
  - {id: long, uses: acp-subagent, with: {agent: hang, prompt: x}}
  - {id: failing, uses: acp-subagent, with: {agent: bad, prompt: y}}
`, engine.Options{})
	if res.Status != engine.StatusFailed || statuses(res) != "failing=failed long=cancelled" {
		t.Errorf("run %s: %s", res.Status, statuses(res))
	}
	if res.Steps["long"].StopReason != "aborted" {
		t.Errorf("long stop reason = %s", res.Steps["long"].StopReason)
	}
}

func TestInterruptCancelsTheRun(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	wf, err := workflows.Parse("wf.yaml", []byte(strings.ReplaceAll(`
name: int
agents:
  hang: {command: AGENT, args: ["-prompt-hang"]}
steps:
  - {id: stuck, uses: acp-subagent, with: {agent: hang, prompt: x}}
`, "AGENT", testAgent)))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, func() { cancel(engine.ErrInterrupted) })
	res := engine.Run(ctx, wf, engine.Options{Workspace: t.TempDir()})
	if res.Status != engine.StatusCancelled || res.Steps["stuck"].Status != engine.StatusCancelled {
		t.Errorf("run %s, step %s", res.Status, res.Steps["stuck"].Status)
	}
	if !errors.Is(context.Cause(ctx), engine.ErrInterrupted) {
		t.Error("cause lost")
	}
}

func TestResumeKeepsDoneStepsAndFeedsTheirOutputs(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "first.jsonl")
	done := map[string]*engine.StepResult{
		"first": {Status: engine.StatusSucceeded, StopReason: "completed", Output: "from before", Attempts: 1},
	}
	res, _ := run(t, fmt.Sprintf(`
name: resume
agents:
  a: {command: AGENT, args: ["-record", %q]}
  b: {command: AGENT}
steps:
  - {id: first, uses: acp-subagent, with: {agent: a, prompt: x}}
  - {id: second, needs: [first], uses: acp-subagent, with: {agent: b, prompt: "${{ steps.first.output }}"}}
outputs:
  first: ${{ steps.first.output }}
`, rec), engine.Options{Done: done})
	if res.Status != engine.StatusSucceeded || res.Outputs["first"] != "from before" {
		t.Errorf("run %s outputs %v", res.Status, res.Outputs)
	}
	if records(t, rec) != nil {
		t.Error("a step that had succeeded ran again")
	}
}

// TestConditionsFailClosed: an `if:` that errors or gives something other
// than a boolean fails its step with the error, never skips it: a skipped
// guard would let the run succeed without it (issue 11).
func TestConditionsFailClosed(t *testing.T) {
	for _, cond := range []string{
		`'!steps.check.json.approved'`,    // json is null: the answer was not JSON
		`steps.check.json.approved`,       // null, not a boolean
		`fromJSON(steps.check.output).ok`, // not JSON: fromJSON fails
		`int(steps.check.output) > 0`,     // not a number
		`steps.check.json ?? "yes"`,       // a string at run time
		`'${{ steps.check.json.approved }}'`,
	} {
		t.Run(cond, func(t *testing.T) {
			res, _ := run(t, `
name: cond
agents:
  ok: {command: AGENT}
steps:
  - {id: check, uses: acp-subagent, with: {agent: ok, prompt: "not json"}}
  - {id: guard, needs: [check], if: `+cond+`, uses: acp-subagent, with: {agent: ok, prompt: x}}
  - {id: after, needs: [guard], uses: acp-subagent, with: {agent: ok, prompt: y}}
`, engine.Options{})
			g := res.Steps["guard"]
			if res.Status != engine.StatusFailed || g.Status != engine.StatusFailed || g.StopReason != "error" {
				t.Fatalf("run %s, guard %s/%s: %s", res.Status, g.Status, g.StopReason, g.Error)
			}
			src := strings.Trim(strings.TrimSuffix(strings.TrimPrefix(strings.Trim(cond, "'"), "${{ "), " }}"), "'")
			if !strings.Contains(g.Error, "step guard: if: "+src) {
				t.Errorf("the error does not name the step and the condition:\n%s", g.Error)
			}
			if a := res.Steps["after"]; a.Status != engine.StatusSkipped {
				t.Errorf("after: %s", a.Status)
			}
		})
	}
}

// TestAConditionFailureWithContinueOnErrorLetsTheRunGoOn: the failed
// condition is a failed step like any other.
func TestAConditionFailureWithContinueOnErrorLetsTheRunGoOn(t *testing.T) {
	res, _ := run(t, `
name: cond
agents:
  ok: {command: AGENT}
steps:
  - {id: check, uses: acp-subagent, with: {agent: ok, prompt: "not json"}}
  - {id: guard, needs: [check], continue-on-error: true, if: steps.check.json.ok, uses: acp-subagent, with: {agent: ok, prompt: x}}
  - {id: other, needs: [check], uses: acp-subagent, with: {agent: ok, prompt: y}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded || statuses(res) != "check=succeeded guard=failed other=succeeded" {
		t.Errorf("run %s: %s", res.Status, statuses(res))
	}
}

// TestForEachTakesAnyList: 1..3 is a []int and split() a []string; both
// are lists, and an error about a value that is not one shows a bounded
// part of it.
func TestForEachTakesAnyList(t *testing.T) {
	res, _ := run(t, `
name: fe
inputs:
  csv: {type: string, default: "a,b"}
agents:
  ok: {command: AGENT}
steps:
  - {id: nums, for-each: 1..3, uses: acp-subagent, with: {agent: ok, prompt: "n ${{ item }}"}}
  - {id: words, for-each: 'split(inputs.csv, ",")', uses: acp-subagent, with: {agent: ok, prompt: "w ${{ item }}"}}
`, engine.Options{})
	if res.Status != engine.StatusSucceeded {
		t.Fatalf("run %s: %s %s %s", res.Status, statuses(res), res.Steps["nums"].Error, res.Steps["words"].Error)
	}
	if n := len(res.Steps["nums"].Output.([]any)); n != 3 {
		t.Errorf("nums ran %d times", n)
	}
	res, _ = run(t, `
name: fe
agents:
  ok: {command: AGENT}
steps:
  - {id: big, for-each: 'fromJSON(toJSON({"k": repeat("x", 100000)}))', uses: acp-subagent, with: {agent: ok, prompt: "n"}}
  - {id: many, for-each: 1..20000, uses: acp-subagent, with: {agent: ok, prompt: "n"}}
`, engine.Options{})
	for _, id := range []string{"big", "many"} {
		s := res.Steps[id]
		if s.Status != engine.StatusFailed || len(s.Error) > 500 {
			t.Errorf("%s: %s, %d bytes of error: %.600s", id, s.Status, len(s.Error), s.Error)
		}
	}
}
