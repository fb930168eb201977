package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
)

// TestAFailedWriteInAGroupFailsAlone queues writes from many goroutines at
// once, so that the writer commits them in groups, every fourth of them a
// step of a run that does not exist (a foreign key the store refuses): each
// of those returns its error, and every other write is committed — read back
// by a second store on the file, as another process would.
func TestAFailedWriteInAGroupFailsAlone(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const runs = 64
	for i := range runs {
		if err := s.CreateRun(ctx, Run{ID: fmt.Sprint("run-", i), Workflow: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			runID := fmt.Sprint("run-", i)
			if i%4 == 3 {
				runID = fmt.Sprint("no-such-run-", i)
			}
			errs[i] = s.SaveStep(ctx, Step{RunID: runID, StepID: "one", Status: engine.StatusSucceeded,
				Output: "out", Permissions: []Permission{{ToolCallID: "c", Decision: "allow"}}, StartedAt: time.Now(), EndedAt: time.Now()})
		})
	}
	for len(s.writer.work) < min(runs, maxGroup) { // all queued: one group
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()

	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i := range runs {
		d, gerr := other.GetRun(ctx, fmt.Sprint("run-", i))
		if gerr != nil {
			t.Fatal(gerr)
		}
		if i%4 == 3 {
			if errs[i] == nil {
				t.Errorf("write %d: a step of a run that does not exist was saved", i)
			}
			if len(d.Steps) != 0 {
				t.Errorf("run-%d: %d steps, want none", i, len(d.Steps))
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("write %d: %v", i, errs[i])
		}
		if len(d.Steps) != 1 || d.Steps[0].Status != engine.StatusSucceeded || len(d.Steps[0].Permissions) != 1 {
			t.Errorf("run-%d: steps %+v, want one succeeded with one permission", i, d.Steps)
		}
	}
}

// TestWritesQueuedTogetherShareACommit holds the writer on a first write
// while others queue behind it, then checks that they were committed
// together, in one transaction, and each returned after it.
func TestWritesQueuedTogetherShareACommit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	if err := s.CreateRun(ctx, Run{ID: "r", Workflow: "w"}); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	const queued = 20
	var wg sync.WaitGroup
	errs := make([]error, queued)
	for i := range queued {
		wg.Go(func() {
			errs[i] = s.SaveStep(ctx, Step{RunID: "r", StepID: fmt.Sprint("s", i), Ord: i, Status: engine.StatusRunning, StartedAt: time.Now()})
		})
	}
	// Wait until every write is queued (an event, not a timer: the
	// channel's length), then let the first one go.
	for len(s.writer.work) < queued {
		time.Sleep(time.Millisecond)
	}
	before := s.writer.commits.Load()
	release()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := s.writer.commits.Load() - before; n != 2 { // the held write's, then one for the twenty
		t.Errorf("%d commits for 1 + %d writes, want 2", n, queued)
	}
	d, err := s.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != queued {
		t.Errorf("%d steps recorded, want %d", len(d.Steps), queued)
	}
}

// holdWriter keeps the writer busy on a write of its own until release is
// called (which waits for that write to commit), so that the writes asked
// for meanwhile queue behind it.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	held, let, first := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		first <- s.writer.do(func(tx *sql.Tx) error {
			close(held)
			<-let
			return nil
		})
	}()
	<-held
	return func() {
		close(let)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseForExitKeepsEveryWrite ends a store as a process about to exit
// does: the writes and queued events are all there for the next opener.
func TestCloseForExitKeepsEveryWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(ctx, Run{ID: "r", Workflow: "w"}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		s.AppendEvent(Event{RunID: "r", Type: "step_update", Fields: map[string]any{"i": i}})
	}
	if err := s.FinishRun(ctx, "r", engine.StatusSucceeded, "", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseForExit(); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(ctx, Run{ID: "late", Workflow: "w"}); !errors.Is(err, errClosed) {
		t.Errorf("a write after CloseForExit: %v, want %v", err, errClosed)
	}
	next, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	d, err := next.GetRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := next.Events(ctx, "r")
	if d.Run.Status != engine.StatusSucceeded || err != nil || len(ev) != 10 {
		t.Errorf("status %s, %d events (%v); want succeeded, 10", d.Run.Status, len(ev), err)
	}
}

// BenchmarkOneStepRunsAt8 writes what a one-step run writes (its row, the
// step's start, its agent, its end, the run's end) from 8 goroutines at
// once, as a batch at --concurrency 8 does: the writes that meet in the
// writer's queue share a commit.
func BenchmarkOneStepRunsAt8(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	var next sync.Mutex
	n := 0
	b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			n++
			id := fmt.Sprint("run-", n)
			next.Unlock()
			begin := time.Now()
			must(b, s.CreateRun(ctx, Run{ID: id, Workflow: "batch", WorkflowFile: "/x.yaml", WorkflowHash: "h", Inputs: map[string]any{}}))
			must(b, s.SaveStep(ctx, Step{RunID: id, StepID: "one", Status: engine.StatusRunning, Attempts: 1, StartedAt: begin}))
			must(b, s.ChildStarted(ctx, id, "one", 1000, 1000, 42))
			must(b, s.ChildEnded(ctx, id, "one", 1000))
			must(b, s.SaveStep(ctx, Step{RunID: id, StepID: "one", Status: engine.StatusSucceeded, StopReason: "completed",
				Output: "Hello, world", Attempts: 1, SessionID: "s", StartedAt: begin, EndedAt: time.Now(), DurationMS: 1}))
			must(b, s.FinishRun(ctx, id, engine.StatusSucceeded, "", map[string]any{}, time.Now()))
		}
	})
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}
