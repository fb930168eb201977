package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
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
			outer, err := loadOuter(f.policy)
			if err != nil {
				return err
			}
			s, id, kind, err := openRecorded(cmd.Context(), f.state, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			out, err := openOutput(f.output)
			if err != nil {
				return usageError(err)
			}
			defer out.Close()
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			x := newExecutor(s, out, f.timeout, outer)
			defer x.runner.Close()
			if kind == store.KindBatch {
				if f.budget != "" {
					b, err := engine.ParseBudget(f.budget)
					if err != nil {
						return usageErrorf("--budget: %v", err)
					}
					x.runner.Budget = b
				}
				c, err := x.runner.ClaimBatch(ctx, id, force)
				if err != nil {
					x.reportStoreErrs()
					return runError(err)
				}
				if c.Pending == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "batch %s: every line already succeeded: nothing to resume\n", id)
					return nil
				}
				x.setView(newBatchView(cmd.OutOrStdout(), f.json, id, c.Pending))
				x.runner.ResumeBatch(ctx, c, concurrency)
				return x.exit(ctx, nil)
			}
			x.setView(newView(cmd.OutOrStdout(), f.json))
			res, err := x.runner.ResumeRun(ctx, id, force)
			switch {
			case errors.Is(err, store.ErrSucceeded):
				fmt.Fprintf(cmd.OutOrStdout(), "run %s already succeeded: nothing to resume\n", id)
				return nil
			case err != nil:
				return runError(err)
			}
			return x.exit(ctx, []*engine.RunResult{res})
		},
	}
	addOutputFlags(cmd, &f)
	durationFlag(cmd.Flags(), &f.timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m, or seconds)")
	cmd.Flags().BoolVar(&force, "force", false, "resume even if the workflow file changed since the run")
	cmd.Flags().StringVar(&f.budget, "budget", "", "a batch's budget from now on, instead of the one it was started with (tokens=N, cost=AMOUNTCUR)")
	cmd.Flags().IntVarP(&concurrency, "concurrency", "c", 0, "runs in flight at once when resuming a batch (default: the batch's)")
	return cmd
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
