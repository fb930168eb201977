package whatif

import (
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/workflows"
)

// LoadPolicies reads POLICY as policy eval does (loadPolicies): a
// workflow's policies with each step's own, or a bare policy file's. A
// workflow is tested as its runs would decide: the policies it lacks are
// the defaults. A bare file is tested for what it holds: without
// permission: its requests are not decided again (the default `reject`
// would only report every allowed request as changed, which says nothing
// about the env policy the file is there for), and without env: its
// spawns are not (the default env policy would report every run recorded
// under another as changed, which says nothing about the permission
// policy the file is there for).
func LoadPolicies(file string) (*Policies, error) {
	src, err := workflows.ReadFile(file, "policy or workflow file")
	if err != nil {
		return nil, err
	}
	if !workflows.IsWorkflow(src) {
		p, err := workflows.LoadPolicyFile(file)
		if err != nil {
			return nil, err
		}
		return policyFile(p), nil
	}
	wf, err := workflows.Load(file)
	if err != nil {
		return nil, err
	}
	all := engine.PoliciesOf(wf, nil)
	pol := &Policies{
		Permission: all.Permission, Source: all.PermissionSource,
		Env: all.Env, EnvSource: all.EnvSource,
	}
	for _, st := range wf.Steps {
		own := engine.PoliciesOf(wf, st)
		if own.PermissionSource == policies.SourceStep {
			if pol.Steps == nil {
				pol.Steps = map[string]policies.Permission{}
			}
			pol.Steps[st.ID] = own.Permission
		}
		if own.EnvSource == policies.SourceStep {
			if pol.EnvSteps == nil {
				pol.EnvSteps = map[string]policies.Env{}
			}
			pol.EnvSteps[st.ID] = own.Env
		}
	}
	return pol, nil
}

// ParsePolicies is LoadPolicies for a bare policy file's text that someone
// sent (the UI's what-if page), named name in errors: it opens no file
// (workflows.ParsePolicyText), and a workflow's text is refused.
func ParsePolicies(name string, text []byte) (*Policies, error) {
	p, err := workflows.ParsePolicyText(name, text)
	if err != nil {
		return nil, err
	}
	return policyFile(p), nil
}

// policyFile is what a bare policy file decides under; see LoadPolicies.
func policyFile(p engine.Policies) *Policies {
	bound := engine.PoliciesOf(&engine.Workflow{Policies: p}, nil)
	return &Policies{Permission: p.Permission, Source: policies.SourceWorkflow,
		Env: bound.Env, EnvSource: bound.EnvSource, NoSpawns: p.Env == nil}
}
