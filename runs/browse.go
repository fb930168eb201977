package runs

import (
	"context"
	"errors"

	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/runs/store"
)

// What a reader of the store (the web UI) names besides runs and batches.
type (
	// Cursor is where a page of runs ends (Filter.Before).
	Cursor = store.Cursor
	// BatchSummary is a batch with its runs counted.
	BatchSummary = store.BatchSummary
	// Event is one recorded event of a run.
	Event = store.Event
	// Watcher tells when anything was committed to the store.
	Watcher = store.Watcher
	// LiveOutput is what a step's attempt has written so far.
	LiveOutput = store.LiveOutput
)

// OpenReadOnly opens an existing run store for reading only (the web UI):
// path as Open takes it. Nothing done through it can change the store; its
// Runner must not be used.
func OpenReadOnly(path string) (*Service, error) {
	if path == "" {
		var err error
		if path, err = store.DefaultPath(); err != nil {
			return nil, err
		}
	}
	s, err := store.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	return &Service{store: s}, nil
}

// Path is the store's file, absolute.
func (v *Service) Path() string { return v.store.Path() }

// ListBatches lists up to limit batches, newest first, with their runs
// counted (workflow: only that workflow's, by name or file; id: that one);
// counted, when not nil, gives summaries already made (store.ListBatches).
func (v *Service) ListBatches(ctx context.Context, workflow, id string, limit int, counted func(Batch) (BatchSummary, bool)) ([]BatchSummary, error) {
	return v.store.ListBatches(ctx, workflow, id, limit, counted)
}

// TimelineEvents reads the events of a run that say when its steps and
// attempts started and ended (store.TimelineEvents), in order.
func (v *Service) TimelineEvents(ctx context.Context, runID string) ([]Event, error) {
	return v.store.TimelineEvents(ctx, runID)
}

// StepLiveOutput reads what a step's latest attempts have written so far
// (store.StepLiveOutput): at most maxBytes of text, the newest.
func (v *Service) StepLiveOutput(ctx context.Context, runID, stepID string, maxBytes int) ([]LiveOutput, error) {
	return v.store.StepLiveOutput(ctx, runID, stepID, maxBytes)
}

// Watch is a Watcher of the store; Close it when done.
func (v *Service) Watch(ctx context.Context) (*Watcher, error) { return v.store.Watch(ctx) }

// ErrNotRunning is what Interrupt returns (wrapped) for a run that is not
// running, or whose acpflow process is gone.
var ErrNotRunning = errors.New("not running")

// Interrupt interrupts a running run the way Ctrl-C does: SIGINT to the
// acpflow process that owns it (the run's steps tear down with their
// graces, the run is recorded cancelled), and only when that process is
// still the one recorded (pid and start time), so that no process that
// reused the pid is signalled. A batch's runs share their owner: the
// signal interrupts the whole batch. It returns the owner signalled.
func (v *Service) Interrupt(ctx context.Context, runID string) (store.Owner, error) {
	d, err := v.store.GetRun(ctx, runID)
	if err != nil {
		return store.Owner{}, err
	}
	r := d.Run
	owner := store.Owner{PID: r.OwnerPID, StartTicks: r.OwnerStartTicks}
	if !r.Status.Live() {
		return owner, &NotRunningError{RunID: runID, Status: string(r.Status)}
	}
	if owner.PID == 0 || !ownerAlive(owner) {
		return owner, &NotRunningError{RunID: runID, Status: "interrupted", Gone: true}
	}
	if err := procgroup.SignalOwner(owner.PID, owner.StartTicks); err != nil {
		if errors.Is(err, procgroup.ErrGone) {
			return owner, &NotRunningError{RunID: runID, Status: "interrupted", Gone: true}
		}
		return owner, err
	}
	return owner, nil
}

// NotRunningError says why a run cannot be interrupted.
type NotRunningError struct {
	RunID  string
	Status string
	Gone   bool // recorded running, but its acpflow process is gone
}

func (e *NotRunningError) Error() string {
	if e.Gone {
		return "run " + e.RunID + " is not running: its acpflow process is gone (it was interrupted; acpflow resume " + e.RunID + " finishes it)"
	}
	return "run " + e.RunID + " is not running: it " + e.Status
}

func (e *NotRunningError) Unwrap() error { return ErrNotRunning }
