package workflows

import (
	"maps"
	"slices"
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
		if !d.allowsAll(s) {
			if mode != "" && !strings.Contains(mode, "${{") && acpagent.DecidesAlone(agent.Preset, mode, "", "") {
				if at == nil {
					at = s.node
				}
				d.at(at.pos, "%s: mode %q lets agent %q run commands and edit files without asking, so the permission policy would see none of it: under any permission policy but allow, use a mode in which the agent asks (or remove mode: to take the preset's)", s.label, mode, ss.AgentName())
			}
			d.checkWideningConfig(s, agent)
		}
	}
}

// allowsAll reports whether step s's permission policy (its own, else the
// workflow's) allows everything: then the agent may decide alone.
func (d *decoder) allowsAll(s *stepInfo) bool {
	perm := s.step.Policies.Permission
	if perm == nil {
		perm = d.wf.Policies.Permission
	}
	return perm != nil && policies.AllowsAll(perm)
}

// checkWideningConfig refuses a config option, on the step's agent or its
// with.config, whose value lets the agent decide alone (Copilot's
// allow_all: on, a mode option set to autopilot), as checkModes refuses
// such a mode.
func (d *decoder) checkWideningConfig(s *stepInfo, agent *steps.Agent) {
	type setting struct {
		id, value string
		at        *node
	}
	var found []setting
	for _, id := range slices.Sorted(maps.Keys(agent.Config)) {
		found = append(found, setting{id, agent.Config[id], d.agentConfigNode(agent.Name, id)})
	}
	if c, ok := s.rawWith["config"].(map[string]any); ok {
		for _, id := range slices.Sorted(maps.Keys(c)) {
			v, err := acpagent.ConfigValue(c[id])
			if err != nil {
				continue
			}
			at, depth := follow(s.node, []string{"with", "config", id})
			if depth < 3 {
				at = nil
			}
			found = append(found, setting{id, v, at})
		}
	}
	for _, f := range found {
		if strings.Contains(f.value, "${{") || !acpagent.WidensConfig(agent.Preset, f.id, f.value, "", "") {
			continue
		}
		at := f.at
		if at == nil {
			at = s.node
		}
		d.at(at.pos, "%s: config %s: %q lets agent %q run commands and edit files without asking, so the permission policy would see none of it: under any permission policy but allow, remove it", s.label, f.id, f.value, agent.Name)
	}
}

// agentConfigNode is the node of agent name's config.ID, or nil.
func (d *decoder) agentConfigNode(name, id string) *node {
	if n := d.agentNodes[name]; n != nil {
		if c := n.get("config"); c != nil && c.kind == mappingNode {
			return c.get(id)
		}
	}
	return nil
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
