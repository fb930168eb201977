package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/runcmd"
)

// runFlags are the flags of run and resume (runcmd.Flags).
type runFlags = runcmd.Flags

// newRunCmd is the run command (runcmd) on the local backend: the runs in
// this process, recorded in the run store at --state, under the outer
// policy of --policy, a person answering at the terminal.
func newRunCmd() *cobra.Command {
	return runcmd.New(localRun)
}

// localRun is acpflow's backend for runcmd.
var localRun = runcmd.Config{
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
func openLocal(ctx context.Context, s runcmd.Setup) (*runs.Runner, func(), error) {
	outer, err := loadOuter(s.Flags.Policy)
	if err != nil {
		return nil, nil, err
	}
	// Opened while the first step's agent starts (runs.OpenAsync): what
	// opening fails with is the run's error at the agent's record, which
	// runcmd words as bad usage.
	svc, err := runs.OpenAsync(s.Flags.State)
	if err != nil {
		return nil, nil, runcmd.UsageError(err)
	}
	r := svc.Runner()
	r.Outer = outer
	// The process exits when run returns: the store's writes are done, its
	// checkpoint is not waited for (store.Store.CloseForExit).
	end := func() { r.Close(); svc.CloseForExit() }
	if err := r.ResolveReplays(ctx, s.Workflow); err != nil {
		end()
		return nil, nil, runcmd.RunError(err)
	}
	return r, end, nil
}
