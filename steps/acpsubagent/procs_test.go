package acpsubagent

import (
	"context"
	"testing"

	"github.com/acpflow/acpflow/steps"
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
// every process seen below the agent through "descendant" events, so that a
// resume after acpflow was SIGKILLed can kill one that left the group.
func TestASetsidGrandchildIsReportedForTheRunStore(t *testing.T) {
	h := newHarness(t, "-setsid-grandchild", "-prompt-delay", "300ms")
	if res := h.run(context.Background()); res.Err != nil {
		t.Fatal(res.Err)
	}
	gc := int(h.recorded("grandchild")[0]["pid"].(float64))
	var spawned *steps.Spawned
	var descendant *steps.Descendant
	var teardown *steps.Teardown
	for _, e := range h.events.all {
		switch d := e.Data.(type) {
		case steps.Spawned:
			spawned = &d
		case steps.Descendant:
			if d.PID == gc {
				descendant = &d
			}
		case steps.Teardown:
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
}
