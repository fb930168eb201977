package runs

import (
	"context"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/runs/store"
)

// TranscriptStore is the part of the run store that Export reads.
type TranscriptStore interface {
	GetRun(ctx context.Context, id string) (*store.RunDetail, error)
	// Transcripts is a run's step attempts, in the order of its steps,
	// elements and attempts, without their permission records (those are
	// the steps').
	Transcripts(ctx context.Context, runID string) ([]transcript.Step, error)
}

// Export is a recorded run as a transcript file (`acpflow export`): its
// step attempts, each step's permission records on the step's first
// recorded attempt, so that `builtin: replay` and `policy test` find the
// decisions beside the requests. A run recorded before transcripts were
// kept (or whose steps never talked to an agent) has no steps.
func Export(ctx context.Context, s TranscriptStore, runID string) (*transcript.File, error) {
	d, err := s.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	attempts, err := s.Transcripts(ctx, runID)
	if err != nil {
		return nil, err
	}
	for _, st := range d.Steps {
		for i := range attempts {
			if attempts[i].Step == st.StepID {
				attempts[i].Permissions = StepResult(st).Permissions
				break
			}
		}
	}
	return &transcript.File{Format: transcript.Format, RunID: d.Run.ID, Workflow: d.Run.Workflow, Steps: attempts}, nil
}
