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

// prepare reaps what a dead acpflow left of a run's agents and returns how
// to resume it: its inputs and the steps that already succeeded.
func (r *resumer) prepare(ctx context.Context, wf *engine.Workflow, id string) (runSpec, *store.RunDetail, error) {
	d, err := r.store.GetRun(ctx, id)
	if err != nil {
		return runSpec{}, nil, err
	}
	run := d.Run
	if run.Status == store.StatusRunning && run.OwnerPID != os.Getpid() && procgroup.Alive(run.OwnerPID, run.OwnerStartTicks) {
		return runSpec{}, d, usageErrorf("run %s is still running (acpflow process %d)", id, run.OwnerPID)
	}
	children, err := r.store.LiveChildren(ctx, id)
	if err != nil {
		return runSpec{}, d, err
	}
	for _, c := range children {
		if procgroup.ReapGroup(c.PGID, c.StartTicks) {
			fmt.Fprintf(os.Stderr, "acpflow: killed agent process group %d left by run %s (step %s)\n", c.PGID, id, c.StepID)
		}
		r.store.ChildEnded(ctx, id, c.StepID, c.PID)
	}
	inputs, err := workflows.ResolveInputs(wf, run.Inputs)
	if err != nil {
		return runSpec{}, d, usageError(fmt.Errorf("run %s: its recorded inputs no longer fit the workflow: %w", id, err))
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
	return runSpec{inputs: inputs, runID: id, done: done, resume: true, batchID: run.BatchID, batchLine: run.BatchLine}, d, nil
}

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
	spec, _, err := r.prepare(ctx, wf, id)
	if err != nil {
		return asUsage(err)
	}
	x := &executor{store: r.store, out: out, workspace: d.Run.Workspace, timeout: f.timeout, view: newView(cmd.OutOrStdout(), f.json)}
	res := x.run(ctx, wf, spec)
	return x.exit(ctx, []*engine.RunResult{res})
}

// batch resumes every line of a batch that did not succeed: recorded runs
// are resumed, lines that never started are run.
func (r *resumer) batch(ctx context.Context, cmd *cobra.Command, id string, out *resultWriter, f *runFlags, concurrency int) error {
	b, err := r.store.GetBatch(ctx, id)
	if err != nil {
		return usageError(err)
	}
	wf, err := r.workflow(b.WorkflowFile, b.WorkflowHash)
	if err != nil {
		return err
	}
	runs, err := r.store.RunsOfBatch(ctx, id)
	if err != nil {
		return err
	}
	latest := map[int]store.Run{} // line → its last run
	for _, run := range runs {
		latest[run.BatchLine] = run
	}
	var jobs []batchJob
	for _, l := range b.Lines {
		line := batchLine{line: l.Line, raw: l.Inputs}
		run, ran := latest[l.Line]
		switch {
		case ran && run.Status == store.StatusSucceeded:
			continue
		case ran:
			spec, _, err := r.prepare(ctx, wf, run.ID)
			if err != nil {
				line.err = err
			}
			jobs = append(jobs, batchJob{line: line, spec: spec})
		default:
			inputs, err := workflows.ResolveInputs(wf, l.Inputs)
			line.inputs, line.err = inputs, err
			jobs = append(jobs, batchJob{line: line, spec: runSpec{inputs: inputs, batchID: id, batchLine: l.Line}})
		}
	}
	if concurrency <= 0 {
		concurrency = max(b.Concurrency, 1)
	}
	x := &executor{store: r.store, out: out, workspace: b.Workspace, timeout: f.timeout, view: newBatchView(cmd.OutOrStdout(), f.json, len(jobs))}
	if len(jobs) == 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "batch %s: every line already succeeded: nothing to resume\n", id)
		return nil
	}
	r.store.FinishBatch(ctx, id, store.StatusRunning)
	return x.runJobs(ctx, wf, id, jobs, concurrency)
}

func permissionRecords(ps []store.Permission) []policies.PermissionRecord {
	out := make([]policies.PermissionRecord, len(ps))
	for i, p := range ps {
		out[i] = engine.PermissionFromStore(p)
	}
	return out
}

// asUsage keeps an error's exit code if it has one, else makes it exit 1.
func asUsage(err error) error {
	var ce *codedError
	if errors.As(err, &ce) {
		return err
	}
	return &codedError{code: exitFailed, err: err}
}
