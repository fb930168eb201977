package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/workflows"
)

type runFlags struct {
	inputs      []string
	inputsFile  string
	concurrency int
	workspace   string
	state       string
	output      string
	json        bool
	timeout     time.Duration
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow once, or once per input line (batch)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorkflow(cmd, args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.inputs, "input", "i", nil, "one workflow input, KEY=VALUE (repeatable)")
	fl.StringVar(&f.inputsFile, "inputs", "", "batch: one run per line of a JSONL file of input objects (- for stdin)")
	fl.IntVarP(&f.concurrency, "concurrency", "c", 4, "runs in flight at once in a batch")
	fl.StringVarP(&f.workspace, "workspace", "w", "", "the run's workspace (default: the current directory)")
	fl.StringVar(&f.state, "state", "", "the run store (default: $ACPFLOW_STATE, else the XDG state dir)")
	fl.StringVarP(&f.output, "output", "o", "", "write one JSON result object per run to FILE, one per line")
	fl.BoolVar(&f.json, "json", false, "print the event stream as JSON lines instead of the human view")
	fl.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m)")
	return cmd
}

func runWorkflow(cmd *cobra.Command, file string, f *runFlags) error {
	if f.inputsFile != "" {
		return usageErrorf("--inputs (batch runs) is not available yet in this build")
	}
	wf, err := workflows.Load(file)
	if err != nil {
		return usageError(err)
	}
	given, err := workflows.ParseInputFlags(wf, f.inputs)
	if err != nil {
		return usageError(err)
	}
	inputs, err := workflows.ResolveInputs(wf, given)
	if err != nil {
		return usageError(err)
	}
	workspace, err := resolveWorkspace(f.workspace)
	if err != nil {
		return usageError(err)
	}
	var out *os.File
	if f.output != "" {
		out, err = os.OpenFile(f.output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return usageErrorf("--output: %v", err)
		}
		defer out.Close()
	}

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	stopSignals := handleSignals(cancel)
	defer stopSignals()

	view := newView(cmd.OutOrStdout(), f.json)
	res := engine.Run(ctx, wf, engine.Options{
		Workspace: workspace,
		Inputs:    inputs,
		Ambient:   policies.EnvMap(os.Environ()),
		Events:    view,
		Timeout:   f.timeout,
	})
	view.Close(res)

	if out != nil {
		if err := writeResult(out, res); err != nil {
			return fmt.Errorf("--output: %w", err)
		}
	}
	switch {
	case errors.Is(context.Cause(ctx), engine.ErrInterrupted):
		return runOutcome(exitInterrupted)
	case res.Status != engine.StatusSucceeded:
		return runOutcome(exitFailed)
	}
	return nil
}

// resolveWorkspace makes the workspace absolute and checks it is a directory.
func resolveWorkspace(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("cannot tell the current directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("--workspace %s: %w", abs, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--workspace %s is not a directory", abs)
	}
	return abs, nil
}

// writeResult writes one result as one line, in a single write, so that a
// reader never sees a torn line.
func writeResult(w io.Writer, res *engine.RunResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// handleSignals turns the first SIGINT/SIGTERM into a cancel of the run
// (each step tears down with its graces) and a second one into SIGKILL for
// every agent's process group.
func handleSignals(cancel context.CancelCauseFunc) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-ch:
				n++
				if n == 1 {
					fmt.Fprintln(os.Stderr, "acpflow: interrupted: cancelling steps (again to kill now)")
					cancel(engine.ErrInterrupted)
				} else {
					procgroup.KillAll()
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
