package workflows

import (
	"github.com/acpflow/acpflow/steps"
)

// checkSessions checks every `session: STEP` (steps.SessionStep): the step
// exists, runs before this one through needs (so its session exists when
// this one starts), is not a for-each (whose elements have a session
// each), holds a session, and talks to the same agent. Then it gives each
// continuing step the cwd of the session's first step (sessionCwds).
func (d *decoder) checkSessions(g *graph) {
	before := len(d.errs)
	defer func() {
		if len(d.errs) == before {
			d.sessionCwds()
		}
	}()
	idx := make(map[*stepInfo]int, len(d.steps))
	for i, s := range d.steps {
		idx[s] = i
	}
	for _, s := range d.steps {
		ss, ok := s.step.Run.(steps.SessionStep)
		if !ok {
			continue
		}
		from, _ := ss.Continues()
		if from == "" {
			continue
		}
		at, _ := follow(s.node, []string{"with", "session"})
		t, ok := d.byID[from]
		switch {
		case !ok:
			d.at(at.pos, "%s: with.session: unknown step %q%s", s.label, from, d.stepNames(from))
		case t == s:
			d.at(at.pos, "%s: with.session: a step cannot continue its own session", s.label)
		case !g.runsBefore(idx[t], idx[s]):
			d.at(at.pos, "%s: with.session: step %q must run before this one: add it to needs (directly or through a step that needs it)", s.label, from)
		case t.forEach:
			d.at(at.pos, "%s: with.session: step %q is a for-each step, whose elements each have a session of their own", s.label, from)
		default:
			ts, ok := t.step.Run.(steps.SessionStep)
			switch {
			case !ok && t.step.Run != nil:
				d.at(at.pos, "%s: with.session: step %q (uses: %s) holds no agent session", s.label, from, t.step.Uses)
			case ok && ts.AgentName() != ss.AgentName():
				d.at(at.pos, "%s: with.session: step %q talks to agent %q and this step to %q; a session is continued by the same agent", s.label, from, ts.AgentName(), ss.AgentName())
			}
		}
	}
}

// sessionCwds gives a step that continues (or forks) a session the cwd of
// the step that began it: an agent keeps a session in the directory it
// began in (claude-agent-acp finds a stored session by it, and on the live
// process the session's cwd never changes), so a `cwd:` of its own would
// be a lie at best. The step's with.cwd is that step's template, rendered
// in its own scope to the same value.
func (d *decoder) sessionCwds() {
	var origin func(s *stepInfo, depth int) *stepInfo
	origin = func(s *stepInfo, depth int) *stepInfo {
		ss, ok := s.step.Run.(steps.SessionStep)
		if !ok || depth > len(d.steps) {
			return s
		}
		from, _ := ss.Continues()
		if from == "" {
			return s
		}
		return origin(d.byID[from], depth+1)
	}
	for _, s := range d.steps {
		ss, ok := s.step.Run.(steps.SessionStep)
		if !ok {
			continue
		}
		if from, _ := ss.Continues(); from == "" {
			continue
		}
		if _, own := s.step.With["cwd"]; own {
			at, _ := follow(s.node, []string{"with", "cwd"})
			d.at(at.pos, "%s: with.cwd: a step that continues a session runs in the directory the session began in; remove cwd: (set it on the step that begins the session)", s.label)
			continue
		}
		if cwd, ok := origin(s, 0).step.With["cwd"]; ok {
			s.step.With["cwd"] = cwd
		}
	}
}
