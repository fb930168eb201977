package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
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
	budget      string
	sandbox     bool
	policy      string // --policy: an outer policy file
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
	fl.StringVar(&f.budget, "budget", "", "batch: what all its runs may spend together, tokens=N and/or cost=AMOUNTCUR (e.g. tokens=100000,cost=5USD)")
	fl.BoolVar(&f.sandbox, "sandbox", false, "confine every agent that sets no sandbox: as with sandbox: true (docs/sandbox.md)")
	addOutputFlags(cmd, &f)
	durationFlag(fl, &f.timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m, or seconds)")
	return cmd
}

// addOutputFlags adds the flags `run` and `resume` share.
func addOutputFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	addStateFlag(cmd, &f.state)
	addPolicyFlag(cmd, &f.policy)
	fl.StringVarP(&f.output, "output", "o", "", "write one JSON result object per run to FILE, one per line")
	fl.BoolVar(&f.json, "json", false, "print the event stream as JSON lines instead of the human view")
}

func runWorkflow(cmd *cobra.Command, file string, f *runFlags) error {
	if f.concurrency < 1 {
		return usageErrorf("--concurrency must be at least 1, got %d", f.concurrency)
	}
	if f.inputsFile != "" && len(f.inputs) > 0 {
		return usageErrorf("--input and --inputs do not go together: put every input in the JSONL lines")
	}
	if f.budget != "" && f.inputsFile == "" {
		return usageErrorf("--budget is a batch's (with --inputs); a run's budget is the workflow's budget: key")
	}
	var budget engine.Budget
	if f.budget != "" {
		var err error
		if budget, err = engine.ParseBudget(f.budget); err != nil {
			return usageErrorf("--budget: %v", err)
		}
	}
	wf, err := workflows.Load(file)
	if err != nil {
		return usageError(err)
	}
	if f.sandbox {
		for _, a := range wf.Agents {
			if a.Sandbox == nil && !a.SandboxSet {
				a.Sandbox = &steps.Sandbox{Network: steps.NetworkOn}
			}
		}
	}
	outer, err := loadOuter(f.policy)
	if err != nil {
		return err
	}
	workspace, err := runs.ResolveWorkspace(f.workspace)
	if err != nil {
		return usageError(err)
	}
	var inputs map[string]any
	var in *batchInput
	var lines *runs.LineReader
	var first runs.BatchLine
	if f.inputsFile != "" {
		if in, err = openInputs(f.inputsFile, fifoWriterWait); err != nil {
			return usageError(err)
		}
		defer in.Close()
		lines = runs.NewLineReader(in, f.inputsFile)
		// The first line is read before anything is recorded: an input with
		// no line at all is bad usage, and nothing starts.
		if first, err = lines.Next(); errors.Is(err, io.EOF) {
			return usageErrorf("--inputs %s: no input lines", f.inputsFile)
		} else if err != nil {
			return usageError(err)
		}
	} else {
		given, err := workflows.ParseInputFlags(wf, f.inputs)
		if err != nil {
			return usageError(err)
		}
		if inputs, err = workflows.ResolveInputs(wf, given); err != nil {
			return usageError(err)
		}
	}
	s, err := openStore(f.state)
	if err != nil {
		return usageError(err)
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
	if err := x.runner.ResolveReplays(ctx, wf); err != nil {
		return runError(err)
	}
	if lines != nil {
		b := runs.NewBatch(wf, workspace, f.inputsFile, f.concurrency, first)
		b.Budget, x.runner.Budget = budget.String(), budget
		x.setView(newBatchView(cmd.OutOrStdout(), f.json, b.ID, 0))
		x.runner.BatchStarted = func(b runs.Batch, total int) {
			if total < 0 {
				fmt.Fprintf(os.Stderr, "acpflow: batch %s: a run per line as they come (if it stops half-way: acpflow resume %s)\n", b.ID, b.ID)
				return
			}
			fmt.Fprintf(os.Stderr, "acpflow: batch %s: %d runs (if it stops half-way: acpflow resume %s)\n", b.ID, total, b.ID)
			setTotal(x.view, total)
		}
		if err := x.runner.Batch(ctx, wf, b, lines, in.regular, f.concurrency); err != nil {
			x.reportStoreErrs()
			return runError(err)
		}
		return x.exit(ctx, nil)
	}
	x.setView(newView(cmd.OutOrStdout(), f.json))
	x.askAtTheTerminal(f.json)
	res := x.runner.Run(ctx, wf, runs.Spec{Inputs: inputs, Workspace: workspace})
	return x.exit(ctx, []*engine.RunResult{res})
}

// executor is one command's runs: the run service's Runner, with the
// command's view and --output.
type executor struct {
	runner *runs.Runner
	out    *runs.Output
	view   view
}

func newExecutor(r *runs.Runner, out *runs.Output, timeout time.Duration, outer policies.Outer) *executor {
	r.Timeout = timeout
	r.Ambient = policies.EnvMap(os.Environ())
	r.Outer = outer
	r.Result = out.Write
	r.Notice = func(msg string) { fmt.Fprintln(os.Stderr, "acpflow: "+termtext.Sanitize(msg)) }
	return &executor{runner: r, out: out}
}

func (x *executor) setView(v view) {
	x.view = v
	x.runner.Events = v
}

// askAtTheTerminal lets a person answer the requests a policy decides to
// ask about, when one run is watched on a terminal: not with --json (a
// program reads it), not in a batch (no one can follow thousands of
// questions), and not without a terminal on stdin. Otherwise the
// policies' ask-fallback decides.
func (x *executor) askAtTheTerminal(jsonOut bool) {
	if jsonOut {
		return
	}
	out := io.Writer(os.Stdout)
	if q, ok := x.view.(interface{ questions() io.Writer }); ok {
		out = q.questions()
	}
	if a := newTermAsker(os.Stdin, out); a != nil {
		x.runner.Asker = a
	}
}

// reportStoreErrs warns of every store error kept, once.
func (x *executor) reportStoreErrs() {
	errs, more := x.runner.StoreErrors()
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "acpflow: warning: the run store could not record everything: %s\n", termtext.Sanitize(err.Error()))
	}
	if more > 0 {
		fmt.Fprintf(os.Stderr, "acpflow: warning: and %d more errors of the run store\n", more)
	}
}

// runError is the error of a run service call that did not run: a request
// that was invalid as given exits 2, anything else 1.
func runError(err error) error {
	var inv *runs.InvalidError
	if errors.As(err, &inv) {
		return usageError(err)
	}
	return asFailure(err)
}

// exit ends the command: the view's summary, then the exit code of docs/results.md#exit-codes.
// results are the runs the view's summary shows (a batch's view counts its
// own).
func (x *executor) exit(ctx context.Context, results []*engine.RunResult) error {
	x.view.Close(results)
	x.reportStoreErrs()
	if err := x.out.Err(); err != nil {
		return &codedError{code: exitFailed, err: fmt.Errorf("--output: %w", err)}
	}
	if errors.Is(context.Cause(ctx), engine.ErrInterrupted) {
		return runOutcome(exitInterrupted)
	}
	if x.runner.Failures() > 0 {
		return runOutcome(exitFailed)
	}
	return nil
}

// interruptible is the run service's signal ladder (runs.Interruptible),
// saying on stderr what the first signal does.
func interruptible(parent context.Context) (context.Context, func()) {
	return runs.Interruptible(parent, func() {
		fmt.Fprintln(os.Stderr, "acpflow: interrupted: cancelling steps (again to kill now)")
	})
}
