package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/workflows"
)

func newResumeCmd() *cobra.Command {
	var (
		f           runFlags
		force       bool
		concurrency int
	)
	cmd := &cobra.Command{
		Use:   "resume RUN_ID|BATCH_ID",
		Short: "Finish a run or batch that failed or was interrupted, without redoing succeeded steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openStore(f.state)
			if err != nil {
				return usageError(err)
			}
			defer s.Close()
			id, kind, err := s.ResolveID(cmd.Context(), args[0])
			if err != nil {
				return usageError(err)
			}
			out, err := openOutput(f.output)
			if err != nil {
				return usageError(err)
			}
			defer out.Close()
			r := &resumer{store: s, force: force}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			if kind == store.KindBatch {
				return r.batch(ctx, cmd, id, out, &f, concurrency)
			}
			return r.run(ctx, cmd, id, out, &f)
		},
	}
	addOutputFlags(cmd, &f)
	durationFlag(cmd.Flags(), &f.timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m, or seconds)")
	cmd.Flags().BoolVar(&force, "force", false, "resume even if the workflow file changed since the run")
	cmd.Flags().IntVarP(&concurrency, "concurrency", "c", 0, "runs in flight at once when resuming a batch (default: the batch's)")
	return cmd
}

// resumer picks up recorded runs.
type resumer struct {
	store *store.Store
	force bool
}

// workflow reloads the workflow a run or batch used and checks that it is
// the same file: resuming with other steps would mix two workflows' results.
func (r *resumer) workflow(file, hash string) (*engine.Workflow, error) {
	wf, err := loadWorkflow(file)
	if err != nil {
		return nil, err
	}
	if wf.Hash != hash && !r.force {
		return nil, usageErrorf("%s changed since the run was recorded; resume with --force to use it as it is now", file)
	}
	return wf, nil
}

// prepare claims a recorded run for this process, reaps what a dead
// acpflow left of its agents and returns how to resume it: its inputs and
// the steps that already succeeded. A run that a live acpflow runs is
// refused (*store.OwnedError); of two processes preparing one run at once,
// exactly one gets it. warn receives the errors of the store that do not
// stop the resume.
func (r *resumer) prepare(ctx context.Context, wf *engine.Workflow, id string, warn func(error)) (runSpec, error) {
	d, err := r.store.GetRun(ctx, id)
	if err != nil {
		return runSpec{}, err
	}
	inputs, err := workflows.ResolveInputs(wf, d.Run.Inputs)
	if err != nil {
		return runSpec{}, usageError(fmt.Errorf("run %s: its recorded inputs no longer fit the workflow: %w", id, err))
	}
	was, err := r.store.ClaimRun(ctx, id, currentOwner(), ownerAlive)
	if err != nil {
		return runSpec{}, err
	}
	// Read again now that the run is ours: its steps are final.
	if d, err = r.store.GetRun(ctx, id); err != nil {
		return runSpec{}, err
	}
	if err := r.reap(ctx, id, was); err != nil {
		warn(fmt.Errorf("run %s: %w", id, err))
	}
	done := map[string]*engine.StepResult{}
	for _, st := range d.Steps {
		if st.Status == store.StatusSucceeded && stepExists(wf, st.StepID) {
			done[st.StepID] = &engine.StepResult{
				Status: st.Status, StopReason: st.StopReason, Output: st.Output, Final: st.Final, Error: st.Error,
				Attempts: st.Attempts, DurationMS: st.DurationMS, SessionID: st.SessionID,
				Permissions: permissionRecords(st.Permissions),
			}
		}
	}
	return runSpec{inputs: inputs, runID: id, done: done, resume: true, batchID: d.Run.BatchID, batchLine: d.Run.BatchLine}, nil
}

// reap kills what the run's previous owner, a dead acpflow, left of its
// agents, and records them ended.
func (r *resumer) reap(ctx context.Context, id string, was store.Owner) error {
	children, err := r.store.LiveChildren(ctx, id)
	if err != nil || len(children) == 0 {
		return err
	}
	left := procgroup.Leftovers{Owner: was.PID, OwnerStartTicks: was.StartTicks}
	for _, c := range children {
		left.Procs = append(left.Procs, procgroup.Proc{PID: c.PID, PGID: c.PGID, StartTicks: c.StartTicks})
	}
	for _, p := range left.Reap() {
		fmt.Fprintf(os.Stderr, "acpflow: killed agent process %d left by run %s\n", p.PID, id)
	}
	var errs []error
	for _, c := range children {
		errs = append(errs, r.store.ChildEnded(ctx, id, c.StepID, c.PID))
	}
	return errors.Join(errs...)
}

// ownerAlive says whether the acpflow process that owns a run or batch is
// still running (the same process: pid and start time).
func ownerAlive(o store.Owner) bool { return procgroup.Alive(o.PID, o.StartTicks) }

func stepExists(wf *engine.Workflow, id string) bool {
	for _, s := range wf.Steps {
		if s.ID == id {
			return true
		}
	}
	return false
}

func (r *resumer) run(ctx context.Context, cmd *cobra.Command, id string, out *resultWriter, f *runFlags) error {
	d, err := r.store.GetRun(ctx, id)
	if err != nil {
		return usageError(err)
	}
	if d.Run.Status == store.StatusSucceeded {
		fmt.Fprintf(cmd.OutOrStdout(), "run %s already succeeded: nothing to resume\n", id)
		return nil
	}
	wf, err := r.workflow(d.Run.WorkflowFile, d.Run.WorkflowHash)
	if err != nil {
		return err
	}
	x := &executor{store: r.store, out: out, workspace: d.Run.Workspace, timeout: f.timeout, view: newView(cmd.OutOrStdout(), f.json)}
	spec, err := r.prepare(ctx, wf, id, x.storeErr)
	var owned *store.OwnedError
	switch {
	case errors.Is(err, store.ErrSucceeded):
		fmt.Fprintf(cmd.OutOrStdout(), "run %s already succeeded: nothing to resume\n", id)
		return nil
	case errors.As(err, &owned):
		return usageError(err)
	case err != nil:
		return asFailure(err)
	}
	res := x.run(ctx, wf, spec)
	return x.exit(ctx, []*engine.RunResult{res})
}

// batch resumes every line of a batch that did not succeed: recorded runs
// are resumed, lines that never started are run. The batch is claimed
// first: one that a live acpflow runs is refused.
func (r *resumer) batch(ctx context.Context, cmd *cobra.Command, id string, out *resultWriter, f *runFlags, concurrency int) error {
	b, err := r.store.GetBatch(ctx, id)
	if err != nil {
		return usageError(err)
	}
	wf, err := r.workflow(b.WorkflowFile, b.WorkflowHash)
	if err != nil {
		return err
	}
	if err := r.store.ClaimBatch(ctx, id, currentOwner(), ownerAlive); err != nil {
		return usageError(err)
	}
	x := &executor{store: r.store, out: out, workspace: b.Workspace, timeout: f.timeout}
	lines, succeeded, err := r.store.BatchProgress(ctx, id)
	if err != nil {
		x.storeErr(r.store.FinishBatch(ctx, id, store.StatusFailed))
		x.reportStoreErrs()
		return err
	}
	if !b.InputsComplete {
		fmt.Fprintf(os.Stderr, "acpflow: warning: batch %s stopped before it had read all of %s: only the %d lines it read are resumed\n",
			id, b.InputsFile, lines)
	}
	if lines == succeeded {
		fmt.Fprintf(cmd.OutOrStdout(), "batch %s: every line already succeeded: nothing to resume\n", id)
		if err := r.store.FinishBatch(ctx, id, store.StatusSucceeded); err != nil {
			return err
		}
		return nil
	}
	if concurrency <= 0 {
		concurrency = max(b.Concurrency, 1)
	}
	x.view = newBatchView(cmd.OutOrStdout(), f.json, id, lines-succeeded)
	next := x.storedJobs(wf, *b, func(ctx context.Context, run store.Run) (runSpec, error) {
		return r.prepare(ctx, wf, run.ID, x.storeErr)
	})
	return x.runJobs(ctx, wf, id, next, concurrency)
}

func permissionRecords(ps []store.Permission) []policies.PermissionRecord {
	out := make([]policies.PermissionRecord, len(ps))
	for i, p := range ps {
		out[i] = engine.PermissionFromStore(p)
	}
	return out
}

// asFailure keeps an error's exit code if it has one, else makes it exit 1:
// a store that fails is not bad usage.
func asFailure(err error) error {
	var ce *codedError
	if errors.As(err, &ce) {
		return err
	}
	return &codedError{code: exitFailed, err: err}
}
