package acpsubagent

import (
	"context"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/procgroup"
)

// TestNothingStartedAtTheEndOfATurnOutlivesTheStep races the teardown: the
// scripted agent answers its prompt and, without waiting, starts
// descendants that leave its process group (setsid), lose their parent (a
// double fork), come many at once (a storm), keep moving to a new pid (a
// daemon that re-forks and exits, generation after generation), or are
// forks of a shell that never exec (found only by the marker every
// descendant inherits). The agent exits on the EOF that follows, so the
// teardown meets these processes at every stage of their start: forked
// and not yet in a session of their own, between fork and exec, orphaned
// while their parent's threads still exit.
//
// Class of input: any timing between a turn's end and the teardown, for
// each way of leaving the group; alone (acpflow may then take every orphan
// for the step's) and beside another live agent (only the marker tells
// whose an orphan is). Each run proves that nothing the agent started is
// alive: the pids it recorded, and every process that carries its marker.
func TestNothingStartedAtTheEndOfATurnOutlivesTheStep(t *testing.T) {
	iterations := 50
	if testing.Short() {
		iterations = 5
	}
	for _, beside := range []bool{false, true} {
		for _, how := range []string{"setsid", "daemon", "storm", "refork", "sh"} {
			name := how + "/alone"
			if beside {
				name = how + "/beside another agent"
			}
			t.Run(name, func(t *testing.T) {
				var other *procgroup.Child
				if beside {
					other = startBystander(t)
				}
				for i := 0; i < iterations && !t.Failed(); i++ {
					h := newHarness(t, "-turn-end-spawn", how)
					if res := h.run(context.Background()); res.Err != nil {
						t.Fatalf("run %d: %v", i, res.Err)
					}
				}
				if other != nil {
					select {
					case <-other.Exited():
						t.Error("the other agent was killed by a teardown that was not its own")
					default:
					}
				}
			})
		}
	}
}

// startBystander starts a live child that is not the step's (cat, waiting
// for its stdin), torn down and proved gone when the test ends.
func startBystander(t *testing.T) *procgroup.Child {
	t.Helper()
	c, err := procgroup.Start(procgroup.Spec{Path: "/bin/cat", Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Teardown(procgroup.Ladder{EOFGrace: 5 * time.Second, TermGrace: time.Second})
		select {
		case <-c.Exited():
		default:
			t.Error("the bystander is still alive")
		}
	})
	return c
}
