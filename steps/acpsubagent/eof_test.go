package acpsubagent

import (
	"context"
	"testing"
	"time"

	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// teardownOf returns the step's teardown event.
func teardownOf(t *testing.T, h *harness) acpagent.Teardown {
	t.Helper()
	for _, e := range h.events.all {
		if td, ok := e.Data.(acpagent.Teardown); ok {
			return td
		}
	}
	t.Fatal("no teardown event")
	return acpagent.Teardown{}
}

// TestAnAgentThatIdlesWhileItFlushesGetsItsWholeEOFGrace: a cooperative
// agent that, once its stdin closes, sits idle while it finishes (here a
// timer; a network write looks the same from outside) exits by itself
// within its eof-grace, and is never sent SIGTERM.
//
// Class of input: an agent acpflow knows nothing about (no eof-idle, no
// preset), flushing for 300 ms to 2 s: with no CPU used, each flush is
// idle for far longer than any idle cut. The grace is half a minute, not
// a few seconds over the flush: on a machine at load 20 the agent's exit
// after its timer can take seconds, and that is the machine, not a cut.
func TestAnAgentThatIdlesWhileItFlushesGetsItsWholeEOFGrace(t *testing.T) {
	for _, flush := range []string{"300ms", "1s", "2s"} {
		t.Run("flushing for "+flush, func(t *testing.T) {
			h := newHarness(t, "-eof-flush", flush)
			h.agent.EOFGrace = 30 * time.Second
			if h.agent.EOFIdle != 0 {
				t.Fatalf("a new agent has eof-idle %s; want none", h.agent.EOFIdle)
			}
			if res := h.run(context.Background()); res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(h.recorded("flushed")) != 1 || len(h.recorded("sigterm")) != 0 {
				t.Errorf("the agent's flush was cut short: %v", h.records())
			}
			if td := teardownOf(t, h); td.Tier != "eof" || td.Exit != "exit status 0" {
				t.Errorf("teardown = %+v, want tier eof, exit status 0", td)
			}
		})
	}
}

// TestEOFIdleEndsTheWaitForAnAgentThatSaysItNeverExitsOnEOF: with
// dispose.eof-idle set, an agent that ignores EOF and sits idle is sent
// SIGTERM once idle that long, not after its whole eof-grace.
//
// Class of input: the idle cut asked for, on an agent that never exits on
// EOF, with and without a TERM handler that ends it (SIGKILL after the
// term grace otherwise).
func TestEOFIdleEndsTheWaitForAnAgentThatSaysItNeverExitsOnEOF(t *testing.T) {
	// The term grace is a minute where the agent's exit on SIGTERM ends it
	// (so a loaded machine's slow exit is not taken for a kill), and five
	// seconds where only SIGKILL can: time for the agent to record the
	// SIGTERM it ignores.
	for _, tc := range []struct {
		name  string
		flags []string
		term  time.Duration
		tier  string
	}{
		{"it exits on SIGTERM", []string{"-ignore-eof"}, time.Minute, "term"},
		{"it ignores SIGTERM", []string{"-ignore-eof", "-trap-term"}, 5 * time.Second, "kill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.flags...)
			h.agent.EOFGrace, h.agent.EOFIdle, h.agent.TermGrace = 2*time.Minute, 100*time.Millisecond, tc.term
			if res := h.run(context.Background()); res.Err != nil {
				t.Fatal(res.Err)
			}
			td := teardownOf(t, h)
			if td.Tier != tc.tier || len(h.recorded("sigterm")) != 1 {
				t.Errorf("teardown = %+v, records %v; want tier %s after one SIGTERM", td, h.records(), tc.tier)
			}
			// Far below the two minutes' grace (a hang guard): the idle
			// agent was not waited for.
			if td.DurationMS > 60_000 {
				t.Errorf("teardown took %d ms: the idle agent was given its whole eof-grace", td.DurationMS)
			}
		})
	}
}
