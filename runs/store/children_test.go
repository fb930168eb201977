package store

import (
	"context"
	"testing"
)

func TestAGroupEndsWithEveryProcessRecordedBelowItsAgent(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if err := s.CreateRun(ctx, Run{ID: "run-1", StartedAt: at(0)}); err != nil {
		t.Fatal(err)
	}
	// Two agents of one step (a for-each): 100 with a setsid descendant 150
	// and an in-group one 151; 200 with its own descendant 250.
	for _, c := range []struct {
		pid, pgid int
		ticks     uint64
		seen      bool
	}{{100, 100, 1, false}, {150, 100, 5, true}, {151, 100, 6, true}, {200, 200, 2, false}, {250, 200, 7, true}} {
		rec := s.ChildStarted
		if c.seen {
			rec = s.DescendantSeen
		}
		if err := rec(ctx, "run-1", "each", c.pid, c.pgid, c.ticks); err != nil {
			t.Fatal(err)
		}
	}
	live, err := s.LiveChildren(ctx, "run-1")
	if err != nil || len(live) != 5 || live[1].PID != 150 || live[1].PGID != 100 || live[1].StartTicks != 5 {
		t.Fatalf("LiveChildren = %+v, %v", live, err)
	}
	if err := s.GroupEnded(ctx, "run-1", "each", 100); err != nil {
		t.Fatal(err)
	}
	live, err = s.LiveChildren(ctx, "run-1")
	if err != nil || len(live) != 2 || live[0].PID != 200 || live[1].PID != 250 {
		t.Errorf("after the first group ended, live = %+v, %v; want the other agent and its descendant", live, err)
	}
}
