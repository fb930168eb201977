package runs

import (
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/redact"
)

// traceRun begins the run's trace when the Runner exports traces (nil
// otherwise): the trace sees the run's events beside the view, and the
// trace's id is known from the run's start (a run id the backend mints
// is set on it at run_start).
func (r *Runner) traceRun(wf *engine.Workflow, spec Spec, req *Request) *trace.Run {
	if r.Traces == nil {
		return nil
	}
	tr := r.Traces.Begin(trace.RunInfo{
		RunID: req.RunID, Workflow: wf.Name, BatchID: spec.BatchID, BatchLine: spec.BatchLine, Resumed: spec.Resume,
		Secrets: redact.CredentialValues(r.Ambient), Paths: []string{spec.Workspace},
	})
	req.Events = bothSinks{req.Events, tr}
	return tr
}

// bothSinks sends every event to two sinks.
type bothSinks [2]steps.Sink

func (b bothSinks) Emit(e steps.Event) {
	b[0].Emit(e)
	b[1].Emit(e)
}
