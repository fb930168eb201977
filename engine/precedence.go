package engine

import "github.com/acpflow/acpflow/policies"

// StepPolicies are the policies that decide one step's permission requests
// and its agent's environment, each with where it was configured (recorded
// with every decision as its `policy`).
type StepPolicies struct {
	Permission       policies.Permission
	PermissionSource policies.Source
	Env              policies.Env
	EnvSource        policies.Source
}

// PoliciesOf says which policies decide step st of wf: for each kind, the
// step's own, else the workflow's, else the default (reject every request;
// policies.DefaultEnv). st nil asks for what a step with no policies of
// its own gets. A run, `acpflow policy eval` and `acpflow policy test` all
// ask here, so that what they say a step's policy is cannot drift apart.
//
// # Notes
//
// The outer policy is not chosen here: it is no alternative to these but a
// layer around whichever they are (policies.Outer.Answer and BuildEnv), and
// a decision it makes final is recorded with policies.LayerOuter and the
// outer file as its policy. A bare policy file (policy eval and policy test
// take one) stands for a workflow's policies: PoliciesOf(&Workflow{Policies:
// p}, nil).
func PoliciesOf(wf *Workflow, st *Step) StepPolicies {
	var sp StepPolicies
	sp.over(wf.Policies, policies.SourceWorkflow)
	if st != nil {
		sp.over(st.Policies, policies.SourceStep)
	}
	if sp.Permission == nil {
		sp.Permission, sp.PermissionSource = policies.DefaultPermission(), policies.SourceDefault
	}
	if sp.Env == nil {
		sp.Env, sp.EnvSource = policies.DefaultEnv(), policies.SourceDefault
	}
	return sp
}

// over sets the policies level p configures, from src, over what sp has.
func (sp *StepPolicies) over(p Policies, src policies.Source) {
	if p.Permission != nil {
		sp.Permission, sp.PermissionSource = p.Permission, src
	}
	if p.Env != nil {
		sp.Env, sp.EnvSource = p.Env, src
	}
}
