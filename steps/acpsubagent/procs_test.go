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
	gc := h.recorded("grandchild")[0]
	var agentPid int
	var descendant, teardown *steps.Event
	for i, e := range h.events.all {
		switch e.Fields["kind"] {
		case "spawned":
			agentPid = e.Fields["pid"].(int)
		case "descendant":
			if e.Fields["pid"] == int(gc["pid"].(float64)) {
				descendant = &h.events.all[i]
			}
		case "teardown":
			teardown = &h.events.all[i]
			if descendant == nil {
				t.Error("no descendant event before the teardown event")
			}
		}
	}
	if descendant == nil {
		t.Fatalf("no descendant event for the setsid grandchild %v", gc["pid"])
	}
	if descendant.Fields["agent_pid"] != agentPid || descendant.Fields["start_ticks"].(uint64) == 0 || descendant.Fields["pgid"] == agentPid {
		t.Errorf("descendant event = %v (agent %d)", descendant.Fields, agentPid)
	}
	if teardown == nil || teardown.Fields["descendants"].(int) < 1 {
		t.Errorf("teardown event = %v", teardown)
	}
}
