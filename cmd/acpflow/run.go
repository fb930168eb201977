package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

// runFlags are the flags of run and resume (cli.Flags).
type runFlags = cli.Flags

// newRunCmd is the run command (cli) on the local backend: the runs in
// this process, recorded in the run store at --state, under the outer
// policy of --policy, a person answering at the terminal.
func newRunCmd() *cobra.Command {
	return cli.New(localRun)
}

// localRun is acpflow's backend for cli.
var localRun = cli.Config{
	Name:        "acpflow",
	Concurrency: 4,
	Open:        openLocal,
	Resume:      func(id string) string { return "acpflow resume " + id },
	ResumeRun:   func(id string) string { return "acpflow resume " + id },
	Interrupted: "interrupted: cancelling steps (again to kill now)",
	Warnings:    true,
	Asker: func(w io.Writer) policies.Asker {
		if a := newTermAsker(os.Stdin, w); a != nil {
			return a
		}
		return nil
	},
}

// openLocal is the Runner of a local run: the outer policy, the run
// store, the replays resolved.
func openLocal(ctx context.Context, s cli.Setup) (*runs.Runner, func(), error) {
	outer, err := loadOuter(s.Flags.Policy)
	if err != nil {
		return nil, nil, err
	}
	// Opened while the first step's agent starts (runs.OpenAsync): what
	// opening fails with is the run's error at the agent's record, which
	// cli words as bad usage.
	svc, err := runs.OpenAsync(s.Flags.State)
	if err != nil {
		return nil, nil, cli.UsageError(err)
	}
	r := svc.Runner()
	r.Outer = outer
	// The process exits when run returns: the store's writes are done, its
	// checkpoint is not waited for (runs.Service.CloseForExit).
	end := func() { r.Close(); svc.CloseForExit() }
	if err := r.ResolveReplays(ctx, s.Workflow); err != nil {
		end()
		return nil, nil, cli.RunError(err)
	}
	return r, end, nil
}
