package whatif

import (
	"context"
	"maps"
	"slices"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/policies"
)

// Placeholder is the value of every variable when a spawn is decided
// again: a spawn is recorded by name only, so a rule that reads `value`
// sees this, as a permission rule sees it for a value the transcript was
// scrubbed of.
const Placeholder = "[redacted]"

// EnvAnswer is an env policy's answer to a spawn, without the environment
// (SpawnResult has the names that differ).
type EnvAnswer struct {
	Policy policies.Source `json:"policy"`
	Rule   string          `json:"rule"`
	// Deny is why the spawn is refused: the policy's reason, or "policy
	// error: …" when it failed. "" when the agent is spawned.
	Deny string `json:"deny,omitempty"`
}

// SpawnResult is one recorded spawn, its environment decided again.
type SpawnResult struct {
	RunID    string    `json:"run_id"`
	Workflow string    `json:"workflow"`
	Step     string    `json:"step"`
	Index    *int      `json:"index,omitempty"` // the for-each element
	Attempt  int       `json:"attempt"`
	Agent    string    `json:"agent"`
	Old      EnvAnswer `json:"old"`
	New      EnvAnswer `json:"new"`
	// Added are the names the child would get and did not, Removed those
	// it got and would not (sorted). A refused spawn's child gets none.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Changed: a name added or removed, or the spawn refused where it was
	// not (or the other way round). Another rule or reason alone is not a
	// change.
	Changed bool `json:"changed"`
}

// envForStep is the env policy a run would give step id: its own, else
// the workflow's, else the default.
func (p *Policies) envForStep(id string) (policies.Env, policies.Source) {
	if env, ok := p.EnvSteps[id]; ok {
		return env, policies.SourceStep
	}
	if p.Env == nil {
		return policies.DefaultEnv(), policies.SourceDefault
	}
	return p.Env, p.EnvSource
}

// decideSpawn asks the step's env policy again for the spawn s recorded,
// as the step asked it before its spawn (policies.BuildEnv), every value
// the Placeholder, and compares the names the child would get.
func (t *Tester) decideSpawn(ctx context.Context, run *Run, s *transcript.Step) *SpawnResult {
	sp := s.Spawn
	res := &SpawnResult{
		RunID: run.ID, Workflow: run.Workflow, Step: s.Step, Index: s.Index, Attempt: s.Attempt, Agent: s.Agent,
		Old: EnvAnswer{Policy: sp.Policy, Rule: sp.Rule, Deny: sp.Deny},
	}
	workspace := run.Workspace
	if workspace == "" {
		workspace = sp.Cwd
	}
	req := &policies.EnvRequest{
		Request: policies.Request{Kind: policies.KindEnv, Workflow: run.Workflow, RunID: run.ID, Step: s.Step,
			Agent: s.Agent, Workspace: workspace, Cwd: sp.Cwd},
		Ambient:  placeholders(sp.Ambient),
		Explicit: placeholders(sp.Explicit),
	}
	env, src := t.pol.envForStep(s.Step)
	dec, err := policies.BuildEnv(ctx, env, req)
	res.New = EnvAnswer{Policy: src, Rule: dec.Rule, Deny: dec.Deny}
	if err != nil {
		res.New.Deny = "policy error: " + err.Error()
	}
	var got []string
	if res.New.Deny == "" {
		got = slices.Sorted(maps.Keys(dec.Env))
	}
	var had []string
	if sp.Deny == "" {
		had = sp.Env
	}
	res.Added, res.Removed = difference(got, had), difference(had, got)
	res.Changed = len(res.Added) > 0 || len(res.Removed) > 0 || (res.Old.Deny == "") != (res.New.Deny == "")
	return res
}

// placeholders is an environment of names whose values are not known.
func placeholders(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = Placeholder
	}
	return m
}

// difference is the names of a that are not in b, sorted, never nil.
func difference(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, n := range b {
		in[n] = true
	}
	out := []string{}
	for _, n := range a {
		if !in[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
