package acpsubagent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/policies"
)

func TestASpawnsEnvDecisionIsRecordedByNameAndNoValueWithIt(t *testing.T) {
	const (
		ambientSecret  = "ghp_ambient-secret-value-4821"
		plainValue     = "plain-ambient-value-3307"
		explicitSecret = "explicit-secret-value-9931"
		stepValue      = "step-explicit-value-5566"
	)
	h := newHarness(t)
	h.ambient["FOO_TOKEN"] = ambientSecret
	h.ambient["PLAIN_VAR"] = plainValue
	h.agent.Env = map[string]string{"DEPLOY_KEY": explicitSecret}
	h.with["env"] = map[string]any{"STEP_VAR": stepValue}
	res := h.run(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Transcript == nil || res.Transcript.Spawn == nil {
		t.Fatal("the attempt's transcript records no spawn")
	}
	sp := res.Transcript.Spawn
	if sp.Policy != policies.SourceWorkflow || sp.Rule != "inherit=all,scrub-credentials" || sp.Deny != "" || sp.Cwd != h.workspace {
		t.Errorf("spawn policy %q, rule %q, deny %q, cwd %q", sp.Policy, sp.Rule, sp.Deny, sp.Cwd)
	}
	if want := []string{"FOO_TOKEN", "HOME", "PATH", "PLAIN_VAR"}; !slices.Equal(sp.Ambient, want) {
		t.Errorf("ambient names %v, want %v", sp.Ambient, want)
	}
	if want := []string{"DEPLOY_KEY", "STEP_VAR"}; !slices.Equal(sp.Explicit, want) {
		t.Errorf("explicit names %v, want %v", sp.Explicit, want)
	}
	// The policy's answer: the credential dropped, the explicit ones on
	// top; PWD and the marker are acpflow's, added at spawn.
	if want := []string{"DEPLOY_KEY", "HOME", "PATH", "PLAIN_VAR", "STEP_VAR"}; !slices.Equal(sp.Env, want) {
		t.Errorf("the child's names %v, want %v", sp.Env, want)
	}
	b, err := json.Marshal(res.Transcript)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{ambientSecret, plainValue, explicitSecret, stepValue} {
		if strings.Contains(string(b), v) {
			t.Errorf("the transcript holds the value %q:\n%s", v, b)
		}
	}
}

// refusingEnv refuses every spawn, quoting a value in its reason as a
// careless policy might.
type refusingEnv struct{ quote string }

func (e refusingEnv) DecideEnv(_ context.Context, req *policies.EnvRequest) (policies.EnvDecision, error) {
	return policies.EnvDecision{Deny: "no spawn while PLAIN_VAR is " + req.Ambient[e.quote], Rule: "refuse.wasm"}, nil
}

func TestARefusedSpawnIsRecordedWithItsReasonAndNothingSpawned(t *testing.T) {
	const plainValue = "plain-ambient-value-3307"
	h := newHarness(t)
	h.ambient["PLAIN_VAR"] = plainValue
	h.env = refusingEnv{quote: "PLAIN_VAR"}
	res := h.run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "refused the spawn") {
		t.Fatalf("err = %v, want the refusal", res.Err)
	}
	if len(h.recorded("start")) != 0 {
		t.Fatal("the agent was started")
	}
	if res.Transcript == nil || res.Transcript.Spawn == nil {
		t.Fatal("a refused spawn leaves no record")
	}
	sp := res.Transcript.Spawn
	if sp.Deny != "no spawn while PLAIN_VAR is [redacted]" || sp.Rule != "refuse.wasm" || len(sp.Env) != 0 || len(res.Transcript.Messages) != 0 {
		t.Errorf("spawn %+v with %d messages", sp, len(res.Transcript.Messages))
	}
	if !slices.Contains(sp.Ambient, "PLAIN_VAR") {
		t.Errorf("ambient names %v lack PLAIN_VAR", sp.Ambient)
	}
}

// An agent the run record cannot name is stopped before it is asked
// anything, and the step fails with the record's error: a crash would
// leave it unseen.
func TestAnAgentThatCannotBeRecordedIsNeverPrompted(t *testing.T) {
	h := newHarness(t)
	h.events.startErr = errors.New("store: record process: state store written by a newer acpflow")
	res := h.run(context.Background())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "newer acpflow") {
		t.Fatalf("err = %v, want the record's error", res.Err)
	}
	if len(h.recorded("start")) == 0 {
		t.Fatal("the agent was not started: the test proves nothing")
	}
	for _, ev := range []string{"initialize", "prompt"} {
		if n := len(h.recorded(ev)); n != 0 {
			t.Errorf("the agent got %d %s requests", n, ev)
		}
	}
	if slices.Contains(h.events.kinds(), "spawned") {
		t.Error("an unrecorded agent was announced spawned")
	}
}
