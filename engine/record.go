package engine

import (
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps"
)

// Recorder keeps a run as it happens (runs.Recorder keeps it in the run
// store; the engine knows no store). The engine calls it synchronously:
// when StepEnded returns, the step's result is durable, so a resumed run
// never redoes a step that succeeded. Every event also goes to Emit.
type Recorder interface {
	steps.Sink
	RunStarted(res *RunResult)
	StepStarted(runID, stepID string, ord, attempt int)
	StepEnded(runID, stepID string, ord int, res *StepResult)
	// StepTranscript keeps the ACP messages of one attempt (docs/transcripts.md).
	StepTranscript(runID string, t *transcript.Step)
	RunEnded(res *RunResult)
	// Processes is where a step's invocation reports the processes it
	// starts, sees and ends (steps.Processes), so that a later resume can
	// reap them after a crash.
	Processes(runID, stepID string) steps.Processes
	// Err is the first record the recorder could not keep: a run whose
	// record is incomplete does not say it succeeded.
	Err() error
}

// processes is the record of a step's processes: the recorder's, or none.
func (r *run) processes(stepID string) steps.Processes {
	if r.opt.Recorder == nil {
		return nil
	}
	return r.opt.Recorder.Processes(r.opt.RunID, stepID)
}
