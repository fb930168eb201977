// Package client submits acpflow runs to Temporal and waits for their
// results: a re-submitted run (the same id) does not redo what succeeded.
package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/temporal/flow"
)

// Submitter starts runs on a task queue.
type Submitter struct {
	Client    client.Client
	TaskQueue string
	Blobs     flow.Blobs
	// Events, when set, receives each run's events (flow.EventsQuery),
	// polled every Poll while the run is waited for (0: only once it
	// ended, one query per run, as a batch wants), the last ones once it
	// ended. It is called from one goroutine per run.
	Events func(line []byte)
	Poll   time.Duration
}

// WorkflowID is the Temporal workflow id of an acpflow run id.
func WorkflowID(runID string) string { return "acpflow-" + runID }

// RunID derives a run's id from what it is: the workflow file's hash, the
// workspace, the batch line (0 for a lone run) and the inputs. Submitting
// the same run again finds the same workflow execution, so that what
// succeeded is not done again; --id names runs instead.
func RunID(wf *engine.Workflow, workspace string, line int, inputs map[string]any) string {
	in, _ := json.Marshal(inputs) // map keys in order: one encoding per value
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n", wf.Hash, workspace, line)
	h.Write(in)
	return "t" + hex.EncodeToString(h.Sum(nil))[:20]
}

// Run runs req to its end on Temporal, or takes up its earlier execution:
// one still running is waited for; one that ended succeeded is its result,
// nothing is run again; one that ended otherwise is started again with the
// steps that succeeded in it done.
func (s *Submitter) Run(ctx context.Context, req flow.Request) (*flow.Outcome, error) {
	id := WorkflowID(req.RunID)
	desc, err := s.Client.DescribeWorkflowExecution(ctx, id, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return nil, err
	case desc.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return s.wait(ctx, s.Client.GetWorkflow(ctx, id, ""))
	case desc.WorkflowExecutionInfo.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var was flow.Outcome
		if err := s.Client.GetWorkflow(ctx, id, "").Get(ctx, &was); err != nil {
			return nil, err
		}
		if was.Status == engine.StatusSucceeded {
			if s.Events != nil {
				seen := 0
				s.events(ctx, s.Client.GetWorkflow(ctx, id, ""), &seen)
			}
			return &was, nil
		}
		req.Done = map[string]flow.Stored{}
		for stepID, st := range was.Steps {
			res, err := s.Blobs.Load(st)
			if err != nil {
				return nil, err
			}
			if res.Status == engine.StatusSucceeded {
				req.Done[stepID] = st
			}
		}
	}
	run, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: s.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, flow.WorkflowName, req)
	if err != nil {
		return nil, err
	}
	return s.wait(ctx, run)
}

func (s *Submitter) wait(ctx context.Context, run client.WorkflowRun) (*flow.Outcome, error) {
	var out flow.Outcome
	if s.Events == nil {
		if err := run.Get(ctx, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, &out) }()
	var tick <-chan time.Time
	if s.Poll > 0 {
		t := time.NewTicker(s.Poll)
		defer t.Stop()
		tick = t.C
	}
	seen := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			s.events(ctx, run, &seen)
			return &out, nil
		case <-tick:
			s.events(ctx, run, &seen)
		}
	}
}

// events hands on the run's events from *seen on. A query that fails (no
// worker to answer it yet) is tried again at the next poll.
func (s *Submitter) events(ctx context.Context, run client.WorkflowRun, seen *int) {
	v, err := s.Client.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), flow.EventsQuery, *seen)
	if err != nil {
		return
	}
	var lines []json.RawMessage
	if v.Get(&lines) != nil {
		return
	}
	for _, l := range lines {
		s.Events(l)
	}
	*seen += len(lines)
	if len(lines) == flow.MaxEventsPerQuery { // there may be more
		s.events(ctx, run, seen)
	}
}
