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

func runOnTemporal(cmd *cobra.Command, conn *connFlags, file string, f *runFlags) error {
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
	wf, err := runs.LoadWorkflow(file)
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
	var src *jobSource
	if lone {
		given, err := workflows.ParseInputFlags(wf, f.inputs)
		if err == nil {
			var inputs map[string]any
			if inputs, err = workflows.ResolveInputs(wf, given); err == nil {
				src = &jobSource{ahead: &job{inputs: inputs}}
			}
		}
		if err != nil {
			return &codedError{exitUsage, err}
		}
	} else {
		if src, err = openJobs(wf, f.inputsFile); err != nil {
			return &codedError{exitUsage, err}
		}
		defer src.Close()
	}

	var out resultWriter
	if f.output != "" {
		fh, err := os.OpenFile(f.output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return usage("--output: %v", err)
		}
		defer fh.Close()
		out.w = fh
	}
	cl, err := conn.dial()
	if err != nil {
		return &codedError{exitFailed, err}
	}
	defer cl.Close()
	ctx, stop := interruptible()
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
	base := flow.Request{
		Bundle: bundle, Plan: flow.PlanOf(wf), Workspace: workspace,
		Env: flow.EnvFor(wf, policies.EnvMap(os.Environ())), Timeout: f.timeout, Heartbeat: f.heartbeat,
	}
	if !lone {
		fmt.Fprintf(os.Stderr, "acpflow-temporal: a run per line of %s on task queue %s (the same command again takes them up)\n", f.inputsFile, conn.taskQueue)
	}
	var (
		mu           sync.Mutex
		failed, done int
		firstErr     error
		slots        = make(chan struct{}, f.concurrency)
		wg           sync.WaitGroup
	)
	var readErr error
	for ctx.Err() == nil {
		j, ok, err := src.Next()
		if err != nil || !ok {
			readErr = err
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			req := base
			req.Inputs = j.inputs
			req.RunID = j.runID(wf, workspace, f.id)
			res, err := resultOf(ctx, sub, blobs, req, j)
			if err == nil {
				err = out.write(res)
			}
			mu.Lock()
			defer mu.Unlock()
			done++
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			if res.Status != engine.StatusSucceeded {
				failed++
			}
			if !f.json && !lone {
				report(stdout, &printMu, wf, res)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil && ctx.Err() == nil { // interrupted: the error is the interrupt
		fmt.Fprintln(os.Stderr, "acpflow-temporal:", firstErr)
	}
	if !lone && !f.json {
		fmt.Fprintf(stdout, "%d runs: %d succeeded, %d failed\n", done, done-failed, failed)
	}
	switch {
	case readErr != nil:
		return &codedError{exitFailed, fmt.Errorf("stopped reading the inputs: %w", readErr)}
	case ctx.Err() != nil:
		return &codedError{130, errors.New("interrupted: the runs go on on Temporal; the same command takes them up")}
	case failed > 0:
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

// job is one run to submit: a lone run's inputs, or a batch line's.
type job struct {
	line    int // 0 for a lone run
	inputs  map[string]any
	invalid error // the line's inputs do not fit the workflow
}

func (j job) runID(wf *engine.Workflow, workspace, id string) string {
	switch {
	case id != "" && j.line == 0:
		return id
	case id != "":
		return fmt.Sprintf("%s-%d", id, j.line)
	}
	return client.RunID(wf, workspace, j.line, j.inputs)
}

// resultOf runs one job, or fails it as acpflow run fails a bad line.
func resultOf(ctx context.Context, sub *client.Submitter, blobs flow.Blobs, req flow.Request, j job) (*engine.RunResult, error) {
	if j.invalid != nil {
		return &engine.RunResult{
			RunID: req.RunID, Workflow: req.Plan.Name, Status: engine.StatusFailed, Error: j.invalid.Error(),
			Workspace: req.Workspace, Inputs: map[string]any{}, Outputs: map[string]any{}, StartedAt: time.Now().UTC(),
			Steps: map[string]*engine.StepResult{},
		}, nil
	}
	outcome, err := sub.Run(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", req.RunID, err)
	}
	return outcome.Result(blobs, req.Workspace)
}

// jobSource yields the runs to submit one at a time: a lone run's, or a
// batch's lines as they are read, so that a batch of any size holds only
// the runs in flight.
type jobSource struct {
	wf    *engine.Workflow
	path  string
	lines *runs.LineReader // nil: a lone run
	file  *os.File         // nil: stdin or a lone run
	ahead *job             // read before anything was submitted
}

// openJobs opens a batch's inputs (- for stdin) and reads its first line,
// so that an input with no line at all is bad usage before anything
// starts, as acpflow run --inputs does.
func openJobs(wf *engine.Workflow, path string) (*jobSource, error) {
	src := &jobSource{wf: wf, path: path}
	var r io.Reader = os.Stdin
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--inputs: %w", err)
		}
		src.file, r = fh, fh
	}
	src.lines = runs.NewLineReader(r, path)
	first, ok, err := src.read()
	switch {
	case err != nil:
		src.Close()
		return nil, err
	case !ok:
		src.Close()
		return nil, fmt.Errorf("--inputs %s: no input lines", path)
	}
	src.ahead = &first
	return src, nil
}

// Next is the next run to submit; false when there is none left.
func (s *jobSource) Next() (job, bool, error) {
	if s.ahead != nil {
		j := *s.ahead
		s.ahead = nil
		return j, true, nil
	}
	if s.lines == nil {
		return job{}, false, nil
	}
	return s.read()
}

// read reads a batch's next line: a line that is not an object of inputs
// that fit the workflow is a job that fails alone, with its line number.
func (s *jobSource) read() (job, bool, error) {
	l, err := s.lines.Next()
	if errors.Is(err, io.EOF) {
		return job{}, false, nil
	}
	if err != nil {
		return job{}, false, err
	}
	j := job{line: l.Line, inputs: l.Inputs}
	if l.Error != "" {
		j.invalid = fmt.Errorf("%s:%d: %s", s.path, l.Line, l.Error)
	} else if j.inputs, err = workflows.ResolveInputs(s.wf, l.Inputs); err != nil {
		j.invalid = fmt.Errorf("%s:%d: %w", s.path, l.Line, err)
	}
	return j, true, nil
}

// Close closes the inputs file, if any.
func (s *jobSource) Close() error {
	if s.file == nil {
		return nil
	}
	return s.file.Close()
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
