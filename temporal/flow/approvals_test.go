package flow

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// queryIn is a Querier of the in-memory Temporal.
func queryIn(env *testsuite.TestWorkflowEnvironment) Querier {
	return func(_ context.Context, _, _, name string, out any, args ...any) error {
		v, err := env.QueryWorkflow(name, args...)
		if err != nil {
			return err
		}
		return v.Get(out)
	}
}

// tapSignals is signal, telling tell of each signal once it is sent (a
// signal the test sends then is the workflow's after it).
func tapSignals(signal Signaller, tell func(name string, arg any)) Signaller {
	return func(ctx context.Context, wid, rid, name string, arg any) error {
		err := signal(ctx, wid, rid, name, arg)
		tell(name, arg)
		return err
	}
}

// askingStep's agent asks permission for two commands in turn; the policy
// asks a person about each, with ask-timeout TIMEOUT, then rejects.
const askingStep = `name: asking
agents:
  asker: {command: TESTAGENT, args: [-record, REC, -permission, "execute:rm -rf build", -permission, "execute:rm -rf dist"]}
policies:
  permission:
    rules:
      - {if: 'tool.kind == "execute"', then: ask}
    default: allow
    ask-timeout: TIMEOUT
    ask-fallback: reject
steps:
  - {id: clean, uses: acp-subagent, with: {agent: asker, prompt: "clean"}}
`

// askingFixture is askingStep with its ask-timeout, and the approvals its
// activity opens, as they are opened.
func askingFixture(t *testing.T, timeout string) (f *fixture, rec string, opened chan Approval) {
	rec = filepath.Join(t.TempDir(), "record.jsonl")
	f = newFixture(t, strings.NewReplacer("REC", rec, "TIMEOUT", timeout).Replace(askingStep), nil)
	opened = make(chan Approval, 8)
	f.signalled = func(name string, arg any) {
		if a, ok := arg.(Approval); ok && name == ApprovalOpenSignal {
			opened <- a
		}
	}
	return f, rec, opened
}

// openedWithin is the next approval opened, within a minute (a hang guard).
func openedWithin(t *testing.T, opened chan Approval) Approval {
	select {
	case a := <-opened:
		return a
	case <-time.After(time.Minute):
		t.Error("no approval was opened within a minute")
		return Approval{}
	}
}

// An ask waits in the run's workflow: the first answer signalled reaches
// the agent as the option it selects, with who answered and when; a
// second answer to it is kept as late; a reject reaches the agent as its
// reject option; the workflow's query shows it all after the run.
func TestAnAskWaitsForTheAnswerSignalledToTheWorkflow(t *testing.T) {
	f, rec, opened := askingFixture(t, "2m")
	env := f.environment(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	go func() {
		first := openedWithin(t, opened)
		env.SignalWorkflow(ApprovalAnswerSignal, Answer{ID: first.ID, Decision: policies.Allow, By: policies.ByCLI, At: at})
		env.SignalWorkflow(ApprovalAnswerSignal, Answer{ID: first.ID, Decision: policies.Reject, By: policies.ByCLI, At: at.Add(time.Second)})
		second := openedWithin(t, opened)
		env.SignalWorkflow(ApprovalAnswerSignal, Answer{ID: second.ID, Decision: policies.Reject, By: policies.ByCLI, At: at.Add(2 * time.Second)})
	}()
	env.ExecuteWorkflow(WorkflowName, f.request(t, "r1"))
	res := f.result(t, env)
	f.settle(t)
	clean := res.Steps["clean"]
	if len(clean.Permissions) != 2 {
		t.Fatalf("permissions %+v", clean.Permissions)
	}
	for i, want := range []string{"opt-allow-once", "opt-reject-once"} {
		p := clean.Permissions[i]
		if p.OptionID != want || p.Ask != "person" || p.AnsweredBy != policies.ByCLI || p.Approval == "" || p.AnsweredAt == "" {
			t.Errorf("record %d: %+v; want %s answered by cli", i, p, want)
		}
	}
	if out, _ := clean.Output.(string); !strings.Contains(out, "permission execute rm -rf build: opt-allow-once\npermission execute rm -rf dist: opt-reject-once") {
		t.Errorf("the agent did not get the answers:\n%s", clean.Output)
	}
	var list []Approval
	if v, err := env.QueryWorkflow(ApprovalsQuery); err != nil || v.Get(&list) != nil || len(list) != 2 {
		t.Fatalf("the run's approvals: %v %+v", err, list)
	}
	if a := list[0]; a.Status != store.ApprovalAnswered || a.Decision != "allow" || a.AnsweredBy != "cli" || !a.AnsweredAt.Equal(at) ||
		len(a.Late) != 1 || a.Late[0].Decision != "reject" || a.ID != clean.Permissions[0].Approval {
		t.Errorf("the first approval: %+v; want allowed by cli, one late reject", a)
	}
	if a := list[1]; a.Status != store.ApprovalAnswered || a.Decision != "reject" || a.Request == nil || a.Request.Tool.Command != "rm -rf dist" {
		t.Errorf("the second approval: %+v", a)
	}
	agentrecord.AssertGone(t, rec)
}

// With no answer within the ask-timeout the ask-fallback answers, the
// reason says so, and the approval reads timed out.
func TestAnUnansweredAskFallsBackAtItsTimeout(t *testing.T) {
	f, rec, _ := askingFixture(t, "1s")
	env := f.environment(t)
	env.ExecuteWorkflow(WorkflowName, f.request(t, "r1"))
	res := f.result(t, env)
	f.settle(t)
	perms := res.Steps["clean"].Permissions
	if len(perms) != 2 {
		t.Fatalf("permissions %+v", perms)
	}
	for _, p := range perms {
		if p.OptionID != "opt-reject-once" || p.Ask != "fallback" || !strings.Contains(p.Reason, "no answer within the ask-timeout (1s): ask-fallback reject") {
			t.Errorf("record %+v; want the fallback's reject", p)
		}
	}
	var list []Approval
	if v, err := env.QueryWorkflow(ApprovalsQuery); err != nil || v.Get(&list) != nil || len(list) != 2 ||
		list[0].Status != store.ApprovalTimedOut || list[1].Status != store.ApprovalTimedOut {
		t.Errorf("the run's approvals: %v %+v; want two, timed out", err, list)
	}
	agentrecord.AssertGone(t, rec)
}
