package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/temporal/client"
	"github.com/acpflow/acpflow/temporal/flow"
	"github.com/acpflow/acpflow/workflows"
)

type runFlags struct {
	inputs      []string
	inputsFile  string
	concurrency int
	workspace   string
	output      string
	json        bool
	timeout     time.Duration
	heartbeat   time.Duration
	id          string
	// Flags of acpflow run that mean nothing here, refused with why.
	state, budget, policy string
}

func newRunCmd(conn *connFlags) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow on Temporal, once or once per input line, and wait for the results",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOnTemporal(cmd, conn, args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.inputs, "input", "i", nil, "one workflow input, KEY=VALUE (repeatable)")
	fl.StringVar(&f.inputsFile, "inputs", "", "batch: one run per line of a JSONL file of input objects (- for stdin)")
	fl.IntVarP(&f.concurrency, "concurrency", "c", 64, "runs submitted and awaited at once (the workers' --concurrency bounds agents)")
	fl.StringVarP(&f.workspace, "workspace", "w", "", "the run's workspace, a path every worker sees (default: the current directory)")
	fl.StringVarP(&f.output, "output", "o", "", "write one JSON result object per run to FILE, one per line")
	fl.BoolVar(&f.json, "json", false, "print the event stream as JSON lines (run_start, step_start, step_update retry, step_end, run_end; a batch's, run by run as each ends)")
	fl.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m)")
	fl.DurationVar(&f.heartbeat, "heartbeat", flow.DefaultHeartbeat, "how long a worker may go silent before its steps move to another worker")
	fl.StringVar(&f.id, "id", "", "the run's id (a batch's runs get ID-LINE); default: derived from the file, workspace and inputs, so the same run submitted again is taken up")
	fl.StringVar(&f.state, "state", "", "not on Temporal: Temporal keeps the runs")
	fl.StringVar(&f.budget, "budget", "", "not on Temporal yet")
	fl.StringVar(&f.policy, "policy", "", "not on the client: the outer policy is the workers' (acpflow-temporal worker --policy)")
	return cmd
}

func usage(format string, a ...any) error {
	return &codedError{exitUsage, fmt.Errorf(format, a...)}
}

// check refuses the flags that cannot go together or mean nothing here,
// before anything is read or dialled.
func (f *runFlags) check() error {
	switch {
	case f.state != "":
		return usage("--state: on Temporal the runs are Temporal's workflow executions; there is no run store to name")
	case f.budget != "":
		return usage("--budget (a batch's) is not supported on Temporal yet; a workflow's own budget: applies to each run")
	case f.policy != "":
		return usage("--policy: the outer policy is the workers' own (acpflow-temporal worker --policy FILE)")
	case f.id != "" && !validID(f.id):
		return usage("--id %q: want 1 to %d letters, digits, '.', '_' or '-'", f.id, maxIDLen)
	case f.heartbeat < time.Second:
		return usage("--heartbeat must be at least 1s, got %s", f.heartbeat)
	case f.concurrency < 1:
		return usage("--concurrency must be at least 1, got %d", f.concurrency)
	case f.inputsFile != "" && len(f.inputs) > 0:
		return usage("--input and --inputs do not go together: put every input in the JSONL lines")
	}
	return nil
}

// runOnTemporal is acpflow-temporal run: the run service's Runner (its
// batch pool, input lines, counts and --output) with the Temporal backend
// and no run store.
func runOnTemporal(cmd *cobra.Command, conn *connFlags, file string, f *runFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	wf, err := workflows.Load(file)
	if err != nil {
		return &codedError{exitUsage, err}
	}
	workspace, err := runs.ResolveWorkspace(f.workspace)
	if err != nil {
		return &codedError{exitUsage, err}
	}
	blobs := flow.Blobs{Dir: conn.blobs}
	bundle, err := flow.NewBundle(blobs, file, wf)
	if err != nil {
		return &codedError{exitUsage, err}
	}
	lone := f.inputsFile == ""
	var inputs map[string]any
	var in *batchInputs
	if lone {
		given, err := workflows.ParseInputFlags(wf, f.inputs)
		if err == nil {
			inputs, err = workflows.ResolveInputs(wf, given)
		}
		if err != nil {
			return &codedError{exitUsage, err}
		}
	} else {
		if in, err = openInputs(f.inputsFile); err != nil {
			return &codedError{exitUsage, err}
		}
		defer in.Close()
	}

	out, err := runs.OpenOutput(f.output)
	if err != nil {
		return &codedError{exitUsage, err}
	}
	defer out.Close()
	cl, err := conn.dial()
	if err != nil {
		return &codedError{exitFailed, err}
	}
	defer cl.Close()
	// The run service's signal ladder: the first signal stops waiting
	// (the runs go on on Temporal), a second kills no agent of this
	// process's (it has none).
	ctx, stop := runs.Interruptible(context.Background(), nil)
	defer stop()
	warnWithoutWorkers(ctx, cl, conn.taskQueue)
	sub := &client.Submitter{Client: cl, TaskQueue: conn.taskQueue, Blobs: blobs}
	var printMu sync.Mutex
	stdout := cmd.OutOrStdout()
	// Events as they happen for a lone run; for a batch, each run's when
	// it ends (one query per run, not a poll of thousands).
	if f.json || lone {
		view := &eventView{out: stdout, mu: &printMu, json: f.json}
		sub.Events = view.line
		if lone {
			sub.Poll = 250 * time.Millisecond
		}
	}
	backend := &temporalBackend{sub: sub, blobs: blobs, id: f.id, base: flow.Request{
		Bundle: bundle, Plan: flow.PlanOf(wf), Workspace: workspace,
		Env: flow.EnvFor(wf, policies.EnvMap(os.Environ())), Timeout: f.timeout, Heartbeat: f.heartbeat,
	}}
	// The run service's pool, lines and counts, with Temporal as the
	// backend and no run store: Temporal keeps the runs.
	r := &runs.Runner{
		Backend: backend,
		Notice:  func(msg string) { fmt.Fprintln(os.Stderr, "acpflow-temporal:", msg) },
		Result: func(res *engine.RunResult) {
			out.Write(res)
			if !f.json && !lone {
				report(stdout, &printMu, wf, res)
			}
		},
		BatchStarted: func(runs.Batch, int) {
			fmt.Fprintf(os.Stderr, "acpflow-temporal: a run per line of %s on task queue %s (the same command again takes them up)\n", f.inputsFile, conn.taskQueue)
		},
	}
	if lone {
		r.Run(ctx, wf, runs.Spec{Inputs: inputs, Workspace: workspace})
	} else {
		b := runs.NewBatch(wf, workspace, f.inputsFile, f.concurrency, in.first)
		if err := r.Batch(ctx, wf, b, in.lines, false, f.concurrency); err != nil {
			return &codedError{exitFailed, err}
		}
		if !f.json {
			ended, failed := r.Runs()
			fmt.Fprintf(stdout, "%d runs: %d succeeded, %d failed\n", ended, ended-failed, failed)
		}
	}
	switch {
	case ctx.Err() != nil:
		return &codedError{130, errors.New("interrupted: the runs go on on Temporal; the same command takes them up")}
	case out.Err() != nil:
		return &codedError{exitFailed, fmt.Errorf("--output: %w", out.Err())}
	case r.Failures() > 0:
		return &codedError{exitFailed, nil}
	}
	return nil
}

// warnWithoutWorkers says so when no worker polls the task queue: the
// runs would wait, silently, until one does.
func warnWithoutWorkers(ctx context.Context, cl sdkclient.Client, queue string) {
	d, err := cl.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err == nil && len(d.GetPollers()) == 0 {
		fmt.Fprintf(os.Stderr, "acpflow-temporal: warning: no worker polls task queue %s: the runs wait until one does (acpflow-temporal worker --task-queue %s)\n", queue, queue)
	}
}

// maxIDLen bounds --id: a batch's run ids add a line number, and
// Temporal's workflow ids add a prefix.
const maxIDLen = 200

// validID says whether id names runs: plain characters only, so that it
// reads the same in a workflow id, a file name and a terminal.
func validID(id string) bool {
	if len(id) > maxIDLen {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return id != ""
}

// temporalBackend runs each run on Temporal: submitted to the task queue
// (taken up if it was submitted before) and awaited.
type temporalBackend struct {
	sub   *client.Submitter
	blobs flow.Blobs
	base  flow.Request
	id    string // --id: the runs' ids; "": derived from what is run
}

// Run implements runs.Backend: it submits the run (see runID) and waits
// for its outcome.
func (b *temporalBackend) Run(ctx context.Context, wf *engine.Workflow, req runs.Request) (*engine.RunResult, error) {
	r := b.base
	r.Inputs = req.Inputs
	r.RunID = b.runID(wf, req)
	outcome, err := b.sub.Run(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.RunID, err)
	}
	return outcome.Result(b.blobs, r.Workspace)
}

// runID is a run's id: --id (a batch's runs: ID-LINE), else derived from
// the file, workspace, line and inputs, so that the same run submitted
// again is taken up.
func (b *temporalBackend) runID(wf *engine.Workflow, req runs.Request) string {
	switch {
	case b.id != "" && req.Line == 0:
		return b.id
	case b.id != "":
		return fmt.Sprintf("%s-%d", b.id, req.Line)
	}
	return client.RunID(wf, b.base.Workspace, req.Line, req.Inputs)
}

// batchInputs is a batch's inputs (- for stdin), its first line read.
type batchInputs struct {
	lines *runs.LineReader
	first runs.BatchLine
	file  *os.File // nil: stdin
}

// openInputs opens a batch's inputs and reads its first line, so that an
// input with no line at all is bad usage before anything starts, as
// acpflow run --inputs does.
func openInputs(path string) (*batchInputs, error) {
	in := &batchInputs{}
	var r io.Reader = os.Stdin
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--inputs: %w", err)
		}
		in.file, r = fh, fh
	}
	in.lines = runs.NewLineReader(r, path)
	var err error
	if in.first, err = in.lines.Next(); errors.Is(err, io.EOF) {
		err = fmt.Errorf("--inputs %s: no input lines", path)
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// Close closes the inputs file, if any.
func (in *batchInputs) Close() error {
	if in.file == nil {
		return nil
	}
	return in.file.Close()
}

// report tells a batch run's end in a line, and each step that did not
// succeed.
func report(w io.Writer, mu *sync.Mutex, wf *engine.Workflow, res *engine.RunResult) {
	mu.Lock()
	defer mu.Unlock()
	line := fmt.Sprintf("run %s %s in %s", res.RunID, res.Status, time.Duration(res.DurationMS)*time.Millisecond)
	if res.Error != "" {
		line += ": " + res.Error
	}
	fmt.Fprintln(w, line)
	for _, st := range wf.Steps {
		if sr := res.Steps[st.ID]; sr != nil && sr.Status != engine.StatusSucceeded && sr.Error != "" {
			fmt.Fprintf(w, "  [%s] %s: %s\n", st.ID, sr.Status, sr.Error)
		}
	}
}
