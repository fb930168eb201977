package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
)

func newResumeCmd() *cobra.Command {
	r := &resume{}
	cmd := &cobra.Command{
		Use:   "resume RUN_ID|BATCH_ID",
		Short: "Finish a run or batch that failed or was interrupted, without redoing succeeded steps",
		Example: `  # take up a failed run where it stopped (ids: acpflow runs --status failed)
  acpflow resume 20261202T180412-3f9a

  # a batch, 8 runs at once, its results appended to the file it was writing
  acpflow resume b20261202T181500-7c2e -c 8 --output results.jsonl

  # a run whose workflow file changed since
  acpflow resume 20261202T180412-3f9a --force`,
		Args: cli.Args("see 'acpflow runs' for ids", "RUN_ID|BATCH_ID"),
		RunE: r.run,
	}
	cli.AddOutputFlags(cmd, &r.f)
	cli.DurationFlag(cmd.Flags(), &r.f.Timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m, or seconds)")
	cmd.Flags().BoolVar(&r.force, "force", false, "resume even if the workflow file changed since the run")
	cmd.Flags().StringVar(&r.f.Budget, "budget", "", "a batch's budget from now on, instead of the one it was started with (tokens=N, cost=AMOUNTCUR)")
	cmd.Flags().IntVarP(&r.concurrency, "concurrency", "c", 0, "runs in flight at once when resuming a batch (default: the batch's)")
	return cmd
}

// resume is resume's flags; run is the command.
type resume struct {
	f           runFlags
	force       bool
	concurrency int
}

// run takes up the run or batch args[0] names where it stopped.
func (r *resume) run(cmd *cobra.Command, args []string) error {
	if err := r.f.CheckOutput(); err != nil {
		return err
	}
	outer, err := loadOuter(r.f.Policy)
	if err != nil {
		return err
	}
	s, id, kind, err := openRecorded(cmd.Context(), r.f.State, args[0])
	if err != nil {
		return err
	}
	defer s.Close()
	out, err := r.f.OpenOutput(cmd)
	if err != nil {
		return err
	}
	defer out.Close()
	ctx, stop := cli.Interruptible(cmd.Context(), localRun.Name, localRun.Interrupted)
	defer stop()
	x := cli.NewExecutor("acpflow", s.Runner(), out, r.f.Timeout)
	x.ResumeHint = localRun.ResumeRun
	x.Runner.Outer = outer
	defer x.Runner.Close()
	endTraces, err := x.StartTraces(ctx)
	if err != nil {
		return err
	}
	defer endTraces()
	if kind == runs.KindBatch {
		return r.batch(ctx, cmd, x, id)
	}
	x.SetView(cli.NewView(r.f.ViewOut(cmd), r.f.JSON))
	res, err := x.Runner.ResumeRun(ctx, id, r.force)
	switch {
	case errors.Is(err, runs.ErrSucceeded):
		if err := deliverRun(ctx, x, id, r.f.Output); err != nil {
			return cli.AsFailure(err)
		}
		fmt.Fprintf(r.f.ViewOut(cmd), "run %s already succeeded: nothing to resume\n", id)
		return nil
	case err != nil:
		return cli.RunError(err)
	}
	return x.Exit(ctx, []*engine.RunResult{res})
}

// batch resumes batch id: it delivers the results of runs that ended but
// are not in --output, then runs the lines that did not succeed.
func (r *resume) batch(ctx context.Context, cmd *cobra.Command, x *cli.Executor, id string) error {
	if r.f.Budget != "" {
		b, err := engine.ParseBudget(r.f.Budget)
		if err != nil {
			return cli.UsageErrorf("--budget: %v", err)
		}
		x.Runner.Budget = b
	}
	c, err := x.Runner.ClaimBatch(ctx, id, r.force)
	if err != nil {
		x.ReportStoreErrs()
		return cli.RunError(err)
	}
	if err := deliverEnded(ctx, x, c, r.f.Output); err != nil {
		return cli.AsFailure(err)
	}
	if c.Pending == 0 {
		fmt.Fprintf(r.f.ViewOut(cmd), "batch %s: every line already succeeded: nothing to resume\n", id)
		return nil
	}
	x.SetView(cli.NewBatchView(r.f.ViewOut(cmd), r.f.JSON, id, c.Pending))
	x.Runner.ResumeBatch(ctx, c, r.concurrency)
	return x.Exit(ctx, nil)
}

// deliverEnded writes to --output the results of the batch's runs that
// succeeded but are not in the file: an acpflow killed between recording a
// run's end and writing its line leaves them, and resume does not run
// them again.
func deliverEnded(ctx context.Context, x *cli.Executor, c *runs.BatchClaim, output string) error {
	if output == "" {
		return nil
	}
	written, err := x.Out.Written()
	if err != nil {
		return err
	}
	n, err := x.Runner.DeliverEnded(ctx, c, func(id string) bool { return written[id] })
	if n > 0 {
		fmt.Fprintf(os.Stderr, "acpflow: wrote to %s the results of %d runs that had ended before the interruption\n", outputName(output), n)
	}
	if err != nil {
		return err
	}
	return x.Out.Err()
}

// deliverRun writes a lone run that already succeeded to --output when the
// file does not hold it (see deliverEnded).
func deliverRun(ctx context.Context, x *cli.Executor, id, output string) error {
	if output == "" {
		return nil
	}
	written, err := x.Out.Written()
	if err != nil {
		return err
	}
	wrote, err := x.Runner.DeliverRun(ctx, id, func(id string) bool { return written[id] })
	if wrote {
		fmt.Fprintf(os.Stderr, "acpflow: wrote to %s the result of run %s, which had ended before the interruption\n", outputName(output), id)
	}
	if err != nil {
		return err
	}
	return x.Out.Err()
}

// outputName is --output as a message names it: `-` is stdout, where
// nothing was written before, so that every run that ended is delivered.
func outputName(output string) string {
	if output == "-" {
		return "stdout"
	}
	return output
}
