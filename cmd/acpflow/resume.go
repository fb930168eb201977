package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
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
			out, err := runs.OpenOutput(f.output)
			if err != nil {
				return usageError(err)
			}
			defer out.Close()
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			x := newExecutor(s.Runner(), out, f.timeout, outer)
			defer x.runner.Close()
			if kind == runs.KindBatch {
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
				if err := x.deliverEnded(ctx, c, f.output); err != nil {
					return asFailure(err)
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
			case errors.Is(err, runs.ErrSucceeded):
				if err := x.deliverRun(ctx, id, f.output); err != nil {
					return asFailure(err)
				}
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

// deliverEnded writes to --output the results of the batch's runs that
// succeeded but are not in the file: an acpflow killed between recording a
// run's end and writing its line leaves them, and resume does not run
// them again.
func (x *executor) deliverEnded(ctx context.Context, c *runs.BatchClaim, output string) error {
	if output == "" {
		return nil
	}
	written, err := x.out.Written()
	if err != nil {
		return err
	}
	n, err := x.runner.DeliverEnded(ctx, c, func(id string) bool { return written[id] })
	if n > 0 {
		fmt.Fprintf(os.Stderr, "acpflow: wrote to %s the results of %d runs that had ended before the interruption\n", output, n)
	}
	if err != nil {
		return err
	}
	return x.out.Err()
}

// deliverRun writes a lone run that already succeeded to --output when the
// file does not hold it (see deliverEnded).
func (x *executor) deliverRun(ctx context.Context, id, output string) error {
	if output == "" {
		return nil
	}
	written, err := x.out.Written()
	if err != nil {
		return err
	}
	wrote, err := x.runner.DeliverRun(ctx, id, func(id string) bool { return written[id] })
	if wrote {
		fmt.Fprintf(os.Stderr, "acpflow: wrote to %s the result of run %s, which had ended before the interruption\n", output, id)
	}
	if err != nil {
		return err
	}
	return x.out.Err()
}
