package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/temporal/flow"
	"github.com/acpflow/acpflow/workflows"
)

func NewWorkerCmd(conn *Conn) *cobra.Command {
	var (
		concurrency int
		cache       string
		policy      string
	)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Poll the task queue and run steps: agents, policies and env policies run here",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if concurrency < 1 {
				return cli.UsageErrorf("--concurrency must be at least 1, got %d", concurrency)
			}
			// Orphans of the agents' trees come back to the worker, so that
			// teardown finds and kills them, as acpflow's does.
			procgroup.EnableSubreaper()
			outer, err := workflows.LoadOuterPolicy(policy, os.Getenv)
			if err != nil {
				return cli.UsageError(err)
			}
			cl, err := conn.Dial()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			defer cl.Close()
			blobs := flow.Blobs{Dir: conn.blobs}
			if cache == "" {
				cache = filepath.Join(conn.blobs, "..", "temporal-workflows")
			}
			w := worker.New(cl, conn.taskQueue, worker.Options{
				MaxConcurrentActivityExecutionSize: concurrency,
			})
			in := &flow.Interpreter{Blobs: blobs}
			w.RegisterWorkflowWithOptions(in.Interpret, workflow.RegisterOptions{Name: flow.WorkflowName})
			acts := &flow.Activities{Blobs: blobs, Cache: cache, Ambient: policies.EnvMap(os.Environ()), Outer: outer,
				StateFiles: store.Files("")}
			w.RegisterActivityWithOptions(acts.Attempt, activity.RegisterOptions{Name: flow.ActivityName})
			fmt.Fprintf(os.Stderr, "acpflow-temporal: worker on %s, task queue %s, %d steps at once\n", conn.address, conn.taskQueue, concurrency)
			if err := w.Run(stopOn(cmd.Context())); err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&concurrency, "concurrency", "c", 4, "steps (agents) this worker runs at once")
	fl.StringVar(&cache, "cache", "", "where workflow files and modules are unpacked (default: beside --blobs)")
	fl.StringVar(&policy, "policy", "", "an outer policy file every step on this worker decides within (as acpflow run --policy)")
	return cmd
}

// stopOn is what stops the worker: SIGINT or SIGTERM (the SDK's
// InterruptCh), or the end of the command's context (SIGHUP, or its
// stdout gone: cli.CommandContext), which would otherwise leave a
// worker polling after its terminal closed.
func stopOn(ctx context.Context) <-chan any {
	stop := make(chan any, 1)
	sig := worker.InterruptCh()
	go func() {
		select {
		case s := <-sig:
			stop <- s
		case <-ctx.Done():
			stop <- context.Cause(ctx)
		}
	}()
	return stop
}
