package runs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
)

// A step's processes reach the store's children table through the
// invocation's Processes, which resume reads to reap after a crash: an
// agent and a process seen below it are live until the agent is reported
// gone, with its group and descendants.
func TestTheRecorderKeepsAStepsProcessesInTheChildrenTable(t *testing.T) {
	for _, c := range []struct {
		name        string
		descendants int // the agent's report when it ends
		seen        bool
	}{
		{"an agent alone ends", 0, false},
		{"an agent ends with the descendant seen below it", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			rec := &Recorder{Store: s, Workflow: &engine.Workflow{Name: "w"}}
			rec.RunStarted(&engine.RunResult{RunID: "r1", StartedAt: time.Now()})

			procs := rec.Processes("r1", "s1")
			procs.Started(100, 7)
			if c.seen {
				procs.Seen(100, 101, 8) // queued: on record by the next write waited for
			}
			barrier := func() {
				t.Helper()
				if err := s.SetRunUsage(ctx, "r1", nil); err != nil {
					t.Fatal(err)
				}
			}
			barrier()
			live, err := s.LiveChildren(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			want := []store.Child{{RunID: "r1", StepID: "s1", PID: 100, PGID: 100, StartTicks: 7}}
			if c.seen {
				want = append(want, store.Child{RunID: "r1", StepID: "s1", PID: 101, PGID: 100, StartTicks: 8})
			}
			if len(live) != len(want) {
				t.Fatalf("live children %+v, want %+v", live, want)
			}
			for i, ch := range live {
				ch.StartedAt = time.Time{}
				if ch != want[i] {
					t.Errorf("live child %d = %+v, want %+v", i, ch, want[i])
				}
			}

			procs.Ended(100, c.descendants)
			barrier()
			if live, _ = s.LiveChildren(ctx, "r1"); len(live) != 0 {
				t.Errorf("after the agent ended, live children %+v", live)
			}
			if err := rec.Err(); err != nil {
				t.Error(err)
			}
		})
	}
}
