package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/workflows"
)

// recordedWorkflow reloads the workflow a run or batch used and checks that
// it is the same file: resuming with other steps would mix two workflows'
// results. force takes the file as it is now.
func recordedWorkflow(file, hash string, force bool) (*engine.Workflow, error) {
	wf, err := workflows.Load(file)
	if err != nil {
		return nil, invalid(err)
	}
	if wf.Hash != hash && !force {
		return nil, invalid(fmt.Errorf("%s changed since the run was recorded; resume with --force to use it as it is now", file))
	}
	return wf, nil
}

// ResumeRun finishes a recorded run that did not succeed: it claims the
// run for this process, reaps what a dead owner left of its agents, and
// runs again every step that did not succeed, keeping the recorded results
// of those that did. A run that already succeeded is store.ErrSucceeded; a
// run that cannot be resumed as asked (the workflow changed, a live
// process owns it) is an *InvalidError, and nothing ran.
func (r *Runner) ResumeRun(ctx context.Context, id string, force bool) (*engine.RunResult, error) {
	d, err := r.Store.GetRun(ctx, id)
	if err != nil {
		return nil, invalid(err)
	}
	if d.Run.Status == engine.StatusSucceeded {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrSucceeded)
	}
	wf, err := recordedWorkflow(d.Run.WorkflowFile, d.Run.WorkflowHash, force)
	if err != nil {
		return nil, err
	}
	if err := r.ResolveReplays(ctx, wf); err != nil {
		return nil, err
	}
	spec, err := r.prepare(ctx, wf, id)
	var owned *store.OwnedError
	switch {
	case errors.As(err, &owned):
		return nil, invalid(err)
	case err != nil:
		return nil, err
	}
	return r.Run(ctx, wf, spec), nil
}

// prepare claims a recorded run for this process, reaps what a dead
// acpflow left of its agents and returns how to resume it: its inputs and
// the steps that already succeeded. A run that a live acpflow runs is
// refused (*store.OwnedError); of two processes preparing one run at once,
// exactly one gets it. Store errors that do not stop the resume are kept
// for StoreErrors.
func (r *Runner) prepare(ctx context.Context, wf *engine.Workflow, id string) (Spec, error) {
	d, err := r.Store.GetRun(ctx, id)
	if err != nil {
		return Spec{}, err
	}
	inputs, err := workflows.ResolveInputs(wf, d.Run.Inputs)
	if err != nil {
		return Spec{}, invalid(fmt.Errorf("run %s: its recorded inputs no longer fit the workflow: %w", id, err))
	}
	was, err := r.Store.ClaimRun(ctx, id, CurrentOwner(), ownerAlive)
	if err != nil {
		return Spec{}, err
	}
	// Read again now that the run is ours: its steps are final.
	if d, err = r.Store.GetRun(ctx, id); err != nil {
		return Spec{}, err
	}
	if err := r.reap(ctx, id, was); err != nil {
		r.storeErr(fmt.Errorf("run %s: %w", id, err))
	}
	done := map[string]*engine.StepResult{}
	for _, st := range d.Steps {
		if st.Status == engine.StatusSucceeded && stepExists(wf, st.StepID) {
			done[st.StepID] = StepResult(st)
		}
	}
	return Spec{
		Inputs: inputs, Workspace: d.Run.Workspace, RunID: id, Done: done, Resume: true,
		BatchID: d.Run.BatchID, BatchLine: d.Run.BatchLine,
	}, nil
}

// reap kills what the run's previous owner, a dead acpflow, left of its
// agents, and records them ended. It kills only what it proves is that
// run's (see procgroup.Leftovers).
func (r *Runner) reap(ctx context.Context, id string, was store.Owner) error {
	children, err := r.Store.LiveChildren(ctx, id)
	if err != nil || len(children) == 0 {
		return err
	}
	left := procgroup.Leftovers{Owner: was.PID, OwnerStartTicks: was.StartTicks}
	for _, c := range children {
		left.Procs = append(left.Procs, procgroup.Proc{PID: c.PID, PGID: c.PGID, StartTicks: c.StartTicks})
	}
	for _, p := range left.Reap() {
		r.notice("killed agent process %d left by run %s", p.PID, id)
	}
	var errs []error
	for _, c := range children {
		errs = append(errs, r.Store.ChildEnded(ctx, id, c.StepID, c.PID))
	}
	return errors.Join(errs...)
}

func stepExists(wf *engine.Workflow, id string) bool {
	for _, s := range wf.Steps {
		if s.ID == id {
			return true
		}
	}
	return false
}

// BatchClaim is a recorded batch this process has claimed to resume (see
// ClaimBatch).
type BatchClaim struct {
	Batch    store.Batch
	Workflow *engine.Workflow
	// Lines is how many input lines the batch has stored; Pending, how many
	// of them have not succeeded, which ResumeBatch runs.
	Lines, Pending int
}

// ClaimBatch claims a recorded batch for this process, so that no other
// resumes it at the same time, and says what is left to do. A batch that a
// live acpflow runs, or whose workflow changed (unless force), is an
// *InvalidError. A batch whose every line already succeeded is ended
// succeeded here; its Pending is 0.
func (r *Runner) ClaimBatch(ctx context.Context, id string, force bool) (*BatchClaim, error) {
	b, err := r.Store.GetBatch(ctx, id)
	if err != nil {
		return nil, invalid(err)
	}
	wf, err := recordedWorkflow(b.WorkflowFile, b.WorkflowHash, force)
	if err != nil {
		return nil, err
	}
	if err := r.ResolveReplays(ctx, wf); err != nil {
		return nil, err
	}
	if err := r.Store.ClaimBatch(ctx, id, CurrentOwner(), ownerAlive); err != nil {
		return nil, invalid(err)
	}
	lines, succeeded, err := r.Store.BatchProgress(ctx, id)
	if err != nil {
		r.storeErr(r.Store.FinishBatch(ctx, id, engine.StatusFailed))
		return nil, err
	}
	if !b.InputsComplete {
		r.notice("warning: batch %s stopped before it had read all of %s: only the %d lines it read are resumed",
			id, b.InputsFile, lines)
	}
	c := &BatchClaim{Batch: *b, Workflow: wf, Lines: lines, Pending: lines - succeeded}
	if c.Pending == 0 {
		if err := r.Store.FinishBatch(ctx, id, engine.StatusSucceeded); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ResumeBatch runs every line of a claimed batch that did not succeed,
// concurrency at a time (0: the batch's own): recorded runs are resumed,
// lines that never started are run.
func (r *Runner) ResumeBatch(ctx context.Context, c *BatchClaim, concurrency int) {
	if concurrency <= 0 {
		concurrency = max(c.Batch.Concurrency, 1)
	}
	next := r.storedJobs(c.Workflow, c.Batch, func(ctx context.Context, run store.Run) (Spec, error) {
		return r.prepare(ctx, c.Workflow, run.ID)
	})
	spent, err := r.batchSpent(ctx, c)
	if err != nil {
		r.storeErr(err)
	}
	r.runJobs(ctx, c.Workflow, c.Batch, next, concurrency, spent)
}

// batchSpent takes up a resumed batch's budget (--budget, else the one it
// was recorded with) and returns what each of its runs spent, which
// counts against it (a run resumed replaces its entry as it runs). The
// batch's earlier error is cleared.
func (r *Runner) batchSpent(ctx context.Context, c *BatchClaim) (map[string]*steps.Usage, error) {
	if r.Budget.IsZero() && c.Batch.Budget != "" {
		b, err := engine.ParseBudget(c.Batch.Budget)
		if err != nil {
			return nil, fmt.Errorf("batch %s: recorded %w", c.Batch.ID, err)
		}
		r.Budget = b
	}
	if err := r.Store.SetBatchError(ctx, c.Batch.ID, r.Budget.String(), ""); err != nil {
		return nil, err
	}
	if r.Budget.IsZero() {
		return nil, nil
	}
	runs, err := r.Store.RunsOfBatch(ctx, c.Batch.ID)
	if err != nil {
		return nil, err
	}
	spent := map[string]*steps.Usage{}
	for _, run := range runs {
		if run.Usage != nil {
			spent[run.ID] = &run.Usage.Usage
		}
	}
	return spent, nil
}
