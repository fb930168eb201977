package runs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
)

// The records of the run service, as its callers read them. They are the
// run store's own types: a caller names them here and never imports the
// store.
type (
	// Run is a recorded run, as `acpflow runs` lists it.
	Run = store.Run
	// RunDetail is a recorded run with its steps, as `acpflow show` shows it.
	RunDetail = store.RunDetail
	// Batch is a recorded batch.
	Batch = store.Batch
	// BatchLine is one input line of a batch.
	BatchLine = store.BatchLine
	// Filter selects recorded runs (`acpflow runs --status …`).
	Filter = store.Filter
	// Step is a run's recorded step, as `acpflow show` and the UI show it.
	Step = store.Step
	// Permission is a step's recorded permission decision.
	Permission = store.Permission
)

// KindBatch is what Service.ResolveID says of a batch's id (KindRun of a
// run's).
const (
	KindRun   = store.KindRun
	KindBatch = store.KindBatch
)

// ErrSucceeded is what resuming a run that already succeeded returns
// (wrapped).
var ErrSucceeded = store.ErrSucceeded

// What Service.ResolveID and the readers of a run return (wrapped) for an
// id the store does not hold, or a prefix of more than one.
var (
	ErrNotFound  = store.ErrNotFound
	ErrAmbiguous = store.ErrAmbiguous
)

// DefaultPath is where the run store is when --state is not given
// (docs/cli.md): a command that keeps files beside it (`acpflow prompt`'s
// workflows) finds the directory without opening the store.
func DefaultPath() (string, error) { return store.DefaultPath() }

// StateFiles are acpflow's own files that no sandbox may read
// (docs/sandbox.md): the store at path ("": the default one) with its
// SQLite files, and the state directory's entries. `acpflow validate`
// checks sandboxes against them as run does.
func StateFiles(path string) []string { return store.Files(path) }

// Service is the run service over one run store: what the commands read
// of it (runs, a run's detail, a batch, transcripts) and the Runners that
// run, resume and record into it. A caller reaches the store only here.
type Service struct {
	store *store.Store
}

// Open opens the run store at path, or where docs/cli.md says when path is
// "" ($ACPFLOW_STATE, else $XDG_STATE_HOME/acpflow/state.db, else
// ~/.local/state/acpflow/state.db).
func Open(path string) (*Service, error) {
	v, err := OpenAsync(path)
	if err != nil {
		return nil, err
	}
	if err := v.store.Ready(context.Background()); err != nil {
		v.store.Close()
		return nil, err
	}
	return v, nil
}

// OpenAsync is Open without waiting for the store's schema and prepared
// statements (store.OpenAsync): a run records into it while they are
// done, and what they fail with is the error of the run's first recorded
// process (Runner.StoreOpenErr says it).
func OpenAsync(path string) (*Service, error) {
	if path == "" {
		var err error
		if path, err = store.DefaultPath(); err != nil {
			return nil, err
		}
	}
	s, err := store.OpenAsync(path)
	if err != nil {
		return nil, err
	}
	return &Service{store: s}, nil
}

// Close closes the run store, after the last Runner is done.
func (v *Service) Close() error { return v.store.Close() }

// CloseForExit ends the run store of a process that exits next: every
// write is done when it returns, but SQLite's checkpoint at close is left
// out (see store.Store.CloseForExit).
func (v *Service) CloseForExit() error { return v.store.CloseForExit() }

// Runner is a new Runner that records into the service's store; the
// caller sets its hooks and closes it.
func (v *Service) Runner() *Runner { return &Runner{Store: v.store} }

// ResolveID resolves a run or batch id, or a unique prefix of one, to the
// id and its kind (KindRun or KindBatch).
func (v *Service) ResolveID(ctx context.Context, idOrPrefix string) (id, kind string, err error) {
	return v.store.ResolveID(ctx, idOrPrefix)
}

// ListRuns lists the recorded runs f selects, newest first.
func (v *Service) ListRuns(ctx context.Context, f Filter) ([]Run, error) {
	return v.store.ListRuns(ctx, f)
}

// RunsOfBatch lists a batch's runs.
func (v *Service) RunsOfBatch(ctx context.Context, batchID string) ([]Run, error) {
	return v.store.RunsOfBatch(ctx, batchID)
}

// GetBatch is a recorded batch.
func (v *Service) GetBatch(ctx context.Context, id string) (*Batch, error) {
	return v.store.GetBatch(ctx, id)
}

// GetRun is a recorded run with its steps.
func (v *Service) GetRun(ctx context.Context, id string) (*RunDetail, error) {
	return v.store.GetRun(ctx, id)
}

// Elements are the for-each elements of a run that are done, by step id,
// each in the order it ended: its index, status, attempts, time and error
// (from its element_end event).
func (v *Service) Elements(ctx context.Context, runID string) (map[string][]Element, error) {
	evs, err := v.store.ElementEnds(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := map[string][]Element{}
	for _, e := range evs {
		var el Element
		b, _ := json.Marshal(e.Fields)
		if err := json.Unmarshal(b, &el); err != nil {
			return nil, fmt.Errorf("run %s: event %d: %w", runID, e.Seq, err)
		}
		out[e.StepID] = append(out[e.StepID], el)
	}
	return out, nil
}

// Element is one for-each element done, as its element_end event says.
type Element struct {
	Index int `json:"index"`
	steps.ElementEnd
}

// Transcripts is a run's step attempts, without their permission records
// (see Export, which joins them).
func (v *Service) Transcripts(ctx context.Context, runID string) ([]transcript.Step, error) {
	return v.store.Transcripts(ctx, runID)
}

// Export is a recorded run as a transcript file (see the func Export).
func (v *Service) Export(ctx context.Context, runID string) (*transcript.File, error) {
	return Export(ctx, v.store, runID)
}
