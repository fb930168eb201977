package whatif_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/whatif"
)

// envPolicy is an env policy as a workflow's YAML decodes.
func envPolicy(t testing.TB, spec map[string]any) policies.Env {
	t.Helper()
	p, err := policies.ParseEnv(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// keepDrop is an env policy of rules, each [condition, keep|drop].
func keepDrop(t testing.TB, rs ...[2]string) policies.Env {
	var list []any
	for _, r := range rs {
		list = append(list, map[string]any{"if": r[0], "then": r[1]})
	}
	return envPolicy(t, map[string]any{"rules": list})
}

// spawnedUnderTheDefault is an attempt as acpflow records one whose spawn
// the default env policy decided: the credential and acpflow's own setting
// dropped, the explicit key on top.
func spawnedUnderTheDefault(step string) transcript.Step {
	return transcript.Step{Step: step, Attempt: 1, Agent: "demo", Messages: []transcript.Message{}, Spawn: &transcript.Spawn{
		Policy: policies.SourceDefault, Rule: "inherit=all,scrub-credentials", Cwd: "/w",
		Ambient:  []string{"ACPFLOW_STATE", "FOO_TOKEN", "PATH", "PLAIN_VAR"},
		Explicit: []string{"DEPLOY_KEY"},
		Env:      []string{"DEPLOY_KEY", "PATH", "PLAIN_VAR"},
	}}
}

// testSpawns re-decides runs under pol and returns the spawn results and
// the totals.
func testSpawns(t *testing.T, pol *whatif.Policies, runs ...*whatif.Run) ([]*whatif.SpawnResult, whatif.Totals) {
	t.Helper()
	w := whatif.New(pol)
	var out []*whatif.SpawnResult
	for _, run := range runs {
		if err := w.Test(context.Background(), run, whatif.Report{Spawn: func(r *whatif.SpawnResult) error { out = append(out, r); return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	return out, w.Totals()
}

func TestEachRecordedSpawnIsDecidedAgainByName(t *testing.T) {
	run := &whatif.Run{ID: "run1", Workflow: "wf", Steps: []transcript.Step{spawnedUnderTheDefault("work")}}
	for _, c := range []struct {
		name           string
		env            policies.Env
		added, removed []string
		rule           string
	}{
		{"the default policy, as recorded, changes nothing", nil, nil, nil, "inherit=all,scrub-credentials"},
		{"dropping one name and keeping a credential is two changes",
			keepDrop(t, [2]string{`name == "PLAIN_VAR"`, "drop"}, [2]string{`name == "FOO_TOKEN"`, "keep"}),
			[]string{"FOO_TOKEN"}, []string{"PLAIN_VAR"}, "rules(2),inherit=all,scrub-credentials"},
		{"the same names by another rule are no change",
			keepDrop(t, [2]string{`name == "PLAIN_VAR"`, "keep"}), nil, nil, "rules(1),inherit=all,scrub-credentials"},
		{"inherit none keeps only the explicit names",
			envPolicy(t, map[string]any{"inherit": "none"}), nil, []string{"PATH", "PLAIN_VAR"}, "inherit=none,scrub-credentials"},
		{"a rule reading value sees the placeholder",
			keepDrop(t, [2]string{`value == "[redacted]" && name == "PATH"`, "drop"}), nil, []string{"PATH"}, "rules(1),inherit=all,scrub-credentials"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := policies.SourceWorkflow
			if c.env == nil {
				src = policies.SourceDefault
			}
			got, tot := testSpawns(t, &whatif.Policies{Permission: rules(t, "reject"), Env: c.env, EnvSource: policies.SourceWorkflow}, run)
			if len(got) != 1 {
				t.Fatalf("%d spawn results, want 1", len(got))
			}
			r := got[0]
			changed := len(c.added)+len(c.removed) > 0
			if !slices.Equal(r.Added, orEmpty(c.added)) || !slices.Equal(r.Removed, orEmpty(c.removed)) || r.Changed != changed {
				t.Errorf("added %v, removed %v, changed %v; want %v, %v, %v", r.Added, r.Removed, r.Changed, c.added, c.removed, changed)
			}
			if r.New.Policy != src || r.New.Rule != c.rule || r.New.Deny != "" {
				t.Errorf("new answer %+v, want policy %s, rule %q", r.New, src, c.rule)
			}
			if r.Old.Policy != policies.SourceDefault || r.Old.Rule != "inherit=all,scrub-credentials" {
				t.Errorf("old answer %+v", r.Old)
			}
			if r.RunID != "run1" || r.Workflow != "wf" || r.Step != "work" || r.Attempt != 1 || r.Agent != "demo" {
				t.Errorf("the result names run %q, workflow %q, step %q, attempt %d, agent %q", r.RunID, r.Workflow, r.Step, r.Attempt, r.Agent)
			}
			want := 0
			if changed {
				want = 1
			}
			if tot.Spawns != 1 || tot.SpawnsChanged != want || tot.Changes() != want {
				t.Errorf("totals: %d spawns, %d changed, %d changes; want 1, %d", tot.Spawns, tot.SpawnsChanged, tot.Changes(), want)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestAStepsOwnEnvPolicyDecidesItsSpawns(t *testing.T) {
	run := &whatif.Run{ID: "r", Steps: []transcript.Step{spawnedUnderTheDefault("plan"), spawnedUnderTheDefault("fix")}}
	got, _ := testSpawns(t, &whatif.Policies{Permission: rules(t, "reject"),
		EnvSteps: map[string]policies.Env{"fix": envPolicy(t, map[string]any{"inherit": "core"})}}, run)
	if len(got) != 2 {
		t.Fatalf("%d results", len(got))
	}
	if got[0].Changed || got[0].New.Policy != policies.SourceDefault {
		t.Errorf("plan, under the default: %+v", got[0])
	}
	if !got[1].Changed || got[1].New.Policy != policies.SourceStep || !slices.Equal(got[1].Removed, []string{"PLAIN_VAR"}) {
		t.Errorf("fix, under its own inherit core: %+v", got[1])
	}
}

// refusing refuses every spawn.
type refusing struct{}

func (refusing) DecideEnv(context.Context, *policies.EnvRequest) (policies.EnvDecision, error) {
	return policies.EnvDecision{Deny: "no agents on CI", Rule: "ci.wasm"}, nil
}

// failing is a policy that errors, as a rule failing at run time does.
type failing struct{}

func (failing) DecideEnv(context.Context, *policies.EnvRequest) (policies.EnvDecision, error) {
	return policies.EnvDecision{}, errors.New("env rule on PATH: boom")
}

func TestARefusalThatComesOrGoesIsAChange(t *testing.T) {
	refused := spawnedUnderTheDefault("work")
	refused.Spawn.Policy, refused.Spawn.Rule, refused.Spawn.Deny, refused.Spawn.Env = policies.SourceWorkflow, "ci.wasm", "no agents on CI", []string{}
	spawned := spawnedUnderTheDefault("work")

	t.Run("a refused spawn now spawned gets every name", func(t *testing.T) {
		got, _ := testSpawns(t, &whatif.Policies{}, &whatif.Run{ID: "r", Steps: []transcript.Step{refused}})
		r := got[0]
		if !r.Changed || r.Old.Deny != "no agents on CI" || r.New.Deny != "" || !slices.Equal(r.Added, []string{"DEPLOY_KEY", "PATH", "PLAIN_VAR"}) || len(r.Removed) != 0 {
			t.Errorf("%+v", r)
		}
	})
	t.Run("a spawn now refused loses every name", func(t *testing.T) {
		got, _ := testSpawns(t, &whatif.Policies{Env: refusing{}, EnvSource: policies.SourceWorkflow}, &whatif.Run{ID: "r", Steps: []transcript.Step{spawned}})
		r := got[0]
		if !r.Changed || r.New.Deny != "no agents on CI" || r.New.Rule != "ci.wasm" || !slices.Equal(r.Removed, []string{"DEPLOY_KEY", "PATH", "PLAIN_VAR"}) {
			t.Errorf("%+v", r)
		}
	})
	t.Run("refused before and now, for another reason, is no change", func(t *testing.T) {
		got, _ := testSpawns(t, &whatif.Policies{Env: failing{}, EnvSource: policies.SourceWorkflow},
			&whatif.Run{ID: "r", Steps: []transcript.Step{refused}})
		r := got[0]
		if r.Changed || r.New.Deny == "" {
			t.Errorf("refused, then refused by a failing policy: %+v", r)
		}
	})
	t.Run("a policy that fails refuses the spawn, as in a run", func(t *testing.T) {
		got, _ := testSpawns(t, &whatif.Policies{Env: failing{}, EnvSource: policies.SourceWorkflow},
			&whatif.Run{ID: "r", Steps: []transcript.Step{spawned}})
		r := got[0]
		if !r.Changed || r.New.Deny != "policy error: env rule on PATH: boom" {
			t.Errorf("%+v", r)
		}
	})
}

func TestAttemptsWithoutASpawnAndAPolicyWithoutPermissionAreNotCounted(t *testing.T) {
	continued := turn("fix", "/w", []call{{id: "c1", kind: "read", title: "README.md", answer: "allow-once"}})
	spawned := turn("plan", "/w", []call{{id: "c1", kind: "read", title: "README.md", answer: "allow-once"}})
	spawned.Spawn = spawnedUnderTheDefault("plan").Spawn
	run := &whatif.Run{ID: "r", Steps: []transcript.Step{spawned, continued}}

	w := whatif.New(&whatif.Policies{Env: keepDrop(t, [2]string{`name == "PLAIN_VAR"`, "drop"}), EnvSource: policies.SourceWorkflow})
	var order []string
	err := w.Test(context.Background(), run, whatif.Report{
		Request: func(r *whatif.Result) error { order = append(order, "request "+r.Step); return nil },
		Spawn:   func(r *whatif.SpawnResult) error { order = append(order, "spawn "+r.Step); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"spawn plan"}; !slices.Equal(order, want) {
		t.Errorf("reported %v, want %v", order, want)
	}
	if tot := w.Totals(); tot.Spawns != 1 || tot.SpawnsChanged != 1 || tot.Requests != 0 || tot.Transcripts != 2 || tot.Changes() != 1 {
		t.Errorf("totals %+v", tot)
	}
}

func TestASpawnIsReportedBeforeTheRequestsOfItsAttempt(t *testing.T) {
	st := turn("plan", "/w", []call{{id: "c1", kind: "read", title: "README.md", answer: "allow-once"}})
	st.Spawn = spawnedUnderTheDefault("plan").Spawn
	w := whatif.New(&whatif.Policies{Permission: rules(t, "allow")})
	var order []string
	w.Test(context.Background(), &whatif.Run{ID: "r", Steps: []transcript.Step{st}}, whatif.Report{
		Request: func(r *whatif.Result) error { order = append(order, "request"); return nil },
		Spawn:   func(r *whatif.SpawnResult) error { order = append(order, "spawn"); return nil },
	})
	if want := []string{"spawn", "request"}; !slices.Equal(order, want) {
		t.Errorf("reported %v, want %v", order, want)
	}
}
