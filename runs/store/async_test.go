package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/acpflow/acpflow/engine"
)

// A run records into a store opened with OpenAsync at once: what it
// queues and what it waits for are all there, in order, once a waited
// write returns, and reads wait for the schema.
func TestOpenAsyncTakesWritesBeforeItIsReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenAsync(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var queuedErrs []error
	q := Queued(context.Background(), func(err error) {
		mu.Lock()
		queuedErrs = append(queuedErrs, err)
		mu.Unlock()
	})
	ctx := context.Background()
	if err := s.CreateRun(q, Run{ID: "r1", Workflow: "wf"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(q, Step{RunID: "r1", StepID: "a", Status: engine.StatusRunning, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	// Waited for: the run and the step queued before it are committed
	// first (the child row needs the run's).
	if err := s.ChildStarted(ctx, "r1", "a", 4242, 4242, 7); err != nil {
		t.Fatalf("ChildStarted after queued writes: %v", err)
	}
	d, err := s.GetRun(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != 1 || d.Steps[0].Status != engine.StatusRunning {
		t.Errorf("steps = %+v, want a running", d.Steps)
	}
	live, err := s.LiveChildren(ctx, "r1")
	if err != nil || len(live) != 1 || live[0].PID != 4242 {
		t.Errorf("LiveChildren = %+v, %v", live, err)
	}
	// A queued write that fails reports its error instead of returning it.
	if err := s.SetRunUsage(q, "nope", nil); err != nil {
		t.Fatalf("a queued write returned %v", err)
	}
	if err := s.Flush(ctx); err != nil { // waits for the writer too
		t.Fatal(err)
	}
	if err := s.ChildEnded(ctx, "r1", "a", 4242); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(queuedErrs) != 1 || !errors.Is(queuedErrs[0], ErrNotFound) {
		t.Errorf("queued errors = %v, want one ErrNotFound", queuedErrs)
	}
}

// A store OpenAsync cannot open (one from a newer acpflow) says why to
// every call that waits, and to every queued write's report: nothing is
// written to it.
func TestOpenAsyncReportsWhyItCouldNotOpen(t *testing.T) {
	s, err := OpenAsync(storeOfANewerAcpflow(t))
	if err != nil {
		t.Fatalf("OpenAsync = %v, want the error later", err)
	}
	defer s.Close()
	reported := make(chan error, 1)
	if err := s.CreateRun(Queued(context.Background(), func(err error) { reported <- err }), Run{ID: "r1", Workflow: "wf"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Ready":        s.Ready(ctx),
		"ChildStarted": s.ChildStarted(ctx, "r1", "a", 1, 1, 1),
		"queued":       <-reported,
		"OpenErr":      s.OpenErr(),
	} {
		if !errors.Is(err, ErrNewerSchema) {
			t.Errorf("%s = %v, want ErrNewerSchema", name, err)
		}
	}
	if _, err := s.GetRun(ctx, "r1"); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("GetRun = %v, want ErrNewerSchema", err)
	}
}
