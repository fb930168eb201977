package runs

import (
	"context"

	"github.com/acpflow/acpflow/engine"
)

// Backend runs one run of a loaded workflow to its end: Local runs it in
// this process (engine.Run); another backend (Temporal's) runs it on its
// workers. The Runner around it does the rest once for every backend: the
// batch pool, the input lines, the results, the counts and the record.
type Backend interface {
	// Run runs one run and returns its result. Its events go to
	// req.Events as they happen (or as the backend learns them). An error
	// says the run could not be run or awaited at all (no result): the
	// Runner counts it failed and tells it as a notice.
	Run(ctx context.Context, wf *engine.Workflow, req Request) (*engine.RunResult, error)
}

// Request is one run for a Backend: what engine.Run takes, and where the
// run sits in its batch.
type Request struct {
	engine.Options
	// Line is the run's line of its batch's inputs; 0 for a lone run. A
	// backend that derives run ids from what is run (Temporal's, so that
	// the same run submitted again is taken up) uses it.
	Line int
}

// Local is the backend that runs a run in this process, its agents
// children of this process.
type Local struct{}

// Run implements Backend: engine.Run, which never fails to return a result.
func (Local) Run(ctx context.Context, wf *engine.Workflow, req Request) (*engine.RunResult, error) {
	return engine.Run(ctx, wf, req.Options), nil
}

// backend is the Runner's backend: Local unless one is set.
func (r *Runner) backend() Backend {
	if r.Backend == nil {
		return Local{}
	}
	return r.Backend
}
