package acpsubagent

import (
	"context"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

func TestTheAgentsPWDIsItsOwnWorkingDirectory(t *testing.T) {
	t.Run("an inherited PWD is replaced by the agent's cwd", func(t *testing.T) {
		h := newHarness(t)
		h.ambient["PWD"] = "/where/acpflow/was/started"
		if res := h.run(context.Background()); res.Err != nil {
			t.Fatal(res.Err)
		}
		start := h.recorded("start")[0]
		if env := start["env"].(map[string]any); env["PWD"] != start["cwd"] || env["PWD"] != h.workspace {
			t.Errorf("PWD = %v, cwd = %v, want both %s", env["PWD"], start["cwd"], h.workspace)
		}
	})
	t.Run("a PWD the workflow sets is kept", func(t *testing.T) {
		h := newHarness(t)
		h.ambient["PWD"] = "/where/acpflow/was/started"
		h.with["env"] = map[string]any{"PWD": "/as/the/workflow/says"}
		if res := h.run(context.Background()); res.Err != nil {
			t.Fatal(res.Err)
		}
		if env := h.recorded("start")[0]["env"].(map[string]any); env["PWD"] != "/as/the/workflow/says" {
			t.Errorf("PWD = %v", env["PWD"])
		}
	})
}

// TestASetsidGrandchildIsReportedForTheRunStore: the run store learns of
// every process the step starts and sees below it through the invocation's
// Processes, each before the event that announces it, so that a resume
// after acpflow was SIGKILLed can kill one that left the group; the
// events say the same.
func TestASetsidGrandchildIsReportedForTheRunStore(t *testing.T) {
	h := newHarness(t, "-setsid-grandchild", "-prompt-delay", "300ms")
	if res := h.run(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	gc := int(h.recorded("grandchild")[0]["pid"].(float64))
	var spawned *acpagent.Spawned
	var descendant *acpagent.Descendant
	var teardown *acpagent.Teardown
	for _, e := range h.events.all {
		switch d := e.Data.(type) {
		case acpagent.Spawned:
			spawned = &d
		case acpagent.Descendant:
			if d.PID == gc {
				descendant = &d
			}
		case acpagent.Teardown:
			teardown = &d
			if descendant == nil {
				t.Error("no descendant event before the teardown event")
			}
		}
	}
	if spawned == nil || descendant == nil || teardown == nil {
		t.Fatalf("spawned %v, descendant %v (grandchild %d), teardown %v", spawned, descendant, gc, teardown)
	}
	agent := spawned.PID
	if descendant.AgentPID != agent || descendant.StartTicks == 0 || descendant.PGID == agent {
		t.Errorf("descendant event = %+v (agent %d)", descendant, agent)
	}
	if teardown.PID != agent || teardown.Descendants < 1 {
		t.Errorf("teardown event = %+v", teardown)
	}

	var seen []procCall
	for _, c := range h.events.procs {
		if c.call == "seen" && c.pid == gc {
			seen = append(seen, c)
		}
	}
	started, ended := h.events.procs[0], h.events.procs[len(h.events.procs)-1]
	switch {
	case started != procCall{call: "started", pid: agent, startTicks: spawned.StartTicks}:
		t.Errorf("first process call = %+v, want the agent started (%d, %d)", started, agent, spawned.StartTicks)
	case len(seen) != 1 || seen[0] != procCall{call: "seen", agentPID: agent, pid: gc, startTicks: descendant.StartTicks}:
		t.Errorf("the grandchild was reported seen as %+v, want once, below %d", seen, agent)
	case ended != procCall{call: "ended", pid: agent, descendants: teardown.Descendants}:
		t.Errorf("last process call = %+v, want the agent ended with %d descendants", ended, teardown.Descendants)
	}
	order := strings.Join(h.events.order, " ")
	for _, pair := range [][2]string{{"process started", "spawned"}, {"process seen", "descendant"}, {"process ended", "teardown"}} {
		if i, j := strings.Index(order, pair[0]), strings.Index(order, pair[1]); i < 0 || j < i {
			t.Errorf("%q does not come before %q: %s", pair[0], pair[1], order)
		}
	}
}
