package workflows

import (
	"strings"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// checkModes refuses a step whose session mode (the step's with.mode, else
// its agent's mode:, a preset's included) is one in which the agent
// decides alone (acpagent.DecidesAlone), under a permission policy other
// than allow: the policy would see nothing, and acpflow's mode guard would
// set the mode back at run time anyway. A templated mode is known only
// when the step runs, where the guard judges it.
func (d *decoder) checkModes() {
	for _, s := range d.steps {
		ss, ok := s.step.Run.(steps.SessionStep)
		if !ok {
			continue
		}
		agent := d.agents[ss.AgentName()]
		if agent == nil {
			continue
		}
		mode, at := agent.Mode, d.agentModeNode(ss.AgentName())
		if m, ok := s.rawWith["mode"].(string); ok {
			mode, at = m, nil
			if n, depth := follow(s.node, []string{"with", "mode"}); depth == 2 {
				at = n
			}
		}
		if mode == "" || strings.Contains(mode, "${{") || !acpagent.DecidesAlone(agent.Preset, mode, "", "") {
			continue
		}
		perm := s.step.Policies.Permission
		if perm == nil {
			perm = d.wf.Policies.Permission
		}
		if perm != nil && policies.AllowsAll(perm) {
			continue
		}
		if at == nil {
			at = s.node
		}
		d.at(at.pos, "%s: mode %q lets agent %q run commands and edit files without asking, so the permission policy would see none of it: under any permission policy but allow, use a mode in which the agent asks (or remove mode: to take the preset's)", s.label, mode, ss.AgentName())
	}
}

// agentModeNode is the node of agent name's mode: key, or of its preset:
// when the mode is the preset's, or nil.
func (d *decoder) agentModeNode(name string) *node {
	n := d.agentNodes[name]
	if n == nil {
		return nil
	}
	if m := n.get("mode"); m != nil {
		return m
	}
	return n.get("preset")
}
