package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/runcmd"
	"github.com/acpflow/acpflow/runs/store"
)

// runFlags are the flags of run and resume (runcmd.Flags).
type runFlags = runcmd.Flags

// newRunCmd is the run command (runcmd) on the local backend: the runs in
// this process, recorded in the run store at --state, under the outer
// policy of --policy, a person answering at the terminal.
func newRunCmd() *cobra.Command {
	cmd := runcmd.New(localRun)
	cmd.PreRun = func(cmd *cobra.Command, _ []string) {
		state, _ := cmd.Flags().GetString("state")
		opening = openInBackground(state)
	}
	return cmd
}

// opening is the run store being opened since run's flags were read (nil:
// not begun); openLocal takes it.
var opening *storeOpening

// storeOpening is a run store opened on a goroutine of its own, while the
// command reads the workflow, its inputs and the outer policy (issue 28:
// opening, its migrations check and the prepared statements were a
// millisecond or more before the step could start).
type storeOpening struct {
	done chan struct{}
	svc  *runs.Service
	err  error
}

// openInBackground begins opening the store at flag, or returns nil when
// it does not exist yet: a run refused for bad usage then still leaves no
// store behind, and opening a new one stays where it was.
func openInBackground(flag string) *storeOpening {
	path := flag
	if path == "" {
		var err error
		if path, err = store.DefaultPath(); err != nil {
			return nil
		}
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	o := &storeOpening{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		o.svc, o.err = openStore(path)
	}()
	return o
}

// take waits for the store and returns it.
func (o *storeOpening) take() (*runs.Service, error) {
	<-o.done
	return o.svc, o.err
}

// localRun is acpflow's backend for runcmd.
var localRun = runcmd.Config{
	Name:        "acpflow",
	Concurrency: 4,
	Open:        openLocal,
	Resume:      func(id string) string { return "acpflow resume " + id },
	ResumeRun:   func(id string) string { return "acpflow resume " + id },
	Interrupted: "interrupted: cancelling steps (again to kill now)",
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
	var svc *runs.Service
	if o := opening; o != nil {
		opening = nil
		svc, err = o.take()
	} else {
		svc, err = openStore(s.Flags.State)
	}
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
