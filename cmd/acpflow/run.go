package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
	"github.com/acpflow/acpflow/internal/procgroup"
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
	wf, err := runs.LoadWorkflow(file)
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
	var first store.BatchLine
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
	out, err := openOutput(f.output)
	if err != nil {
		return usageError(err)
	}
	defer out.Close()

	ctx, stop := interruptible(cmd.Context())
	defer stop()
	x := newExecutor(s, out, f.timeout, outer)
	defer x.runner.Close()
	if err := x.runner.ResolveReplays(ctx, wf); err != nil {
		return runError(err)
	}
	if lines != nil {
		b := runs.NewBatch(wf, workspace, f.inputsFile, f.concurrency, first)
		b.Budget, x.runner.Budget = budget.String(), budget
		x.setView(newBatchView(cmd.OutOrStdout(), f.json, b.ID, 0))
		x.runner.BatchStarted = func(b store.Batch, total int) {
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
	out    *resultWriter
	view   view
}

func newExecutor(s *store.Store, out *resultWriter, timeout time.Duration, outer policies.Outer) *executor {
	x := &executor{out: out}
	x.runner = &runs.Runner{
		Store:   s,
		Timeout: timeout,
		Ambient: policies.EnvMap(os.Environ()),
		Outer:   outer,
		Result:  out.write,
		Notice:  func(msg string) { fmt.Fprintln(os.Stderr, "acpflow: "+termtext.Sanitize(msg)) },
	}
	return x
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
	if err := x.out.err(); err != nil {
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

// resultWriter writes `--output`: one JSON object per run, one line each,
// in completion order, each line in a single write so that no reader (and
// no crash) ever sees a torn line.
type resultWriter struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	first error
}

func openOutput(path string) (*resultWriter, error) {
	if path == "" {
		return &resultWriter{}, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	return &resultWriter{path: path, f: f}, nil
}

// written reads the run ids of the lines already in the --output file, so
// that resume writes the results a killed acpflow had recorded but not yet
// written, and none twice. A last line cut short (a full disk) is ended
// with a newline, so that the next line starts whole. No file: none.
func (w *resultWriter) written() (map[string]bool, error) {
	ids := map[string]bool{}
	if w.f == nil {
		return ids, nil
	}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		// A result line may be megabytes; its run id comes first. A line
		// without its newline is the last write, perhaps cut short: it
		// holds its run's result only if it is whole JSON.
		const head = 4 << 10
		line, err := readLineHead(r, head)
		whole := err == nil || len(line) < head && json.Valid(line)
		if id := leadingRunID(line); id != "" && whole {
			ids[id] = true
		}
		if err == io.EOF {
			if len(line) > 0 {
				w.mu.Lock()
				_, err = w.f.Write([]byte{'\n'})
				w.mu.Unlock()
				if err != nil {
					return nil, fmt.Errorf("--output: %w", err)
				}
			}
			return ids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--output: %w", err)
		}
	}
}

// leadingRunID is the run id a result line begins with ({"run_id":"…",
// as RunResult encodes), read from the line's head alone; "" if none.
func leadingRunID(head []byte) string {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	if t, err := d.Token(); err != nil || t != "run_id" {
		return ""
	}
	id, _ := d.Token()
	s, _ := id.(string)
	return s
}

func (w *resultWriter) write(res *engine.RunResult) {
	if w.f == nil {
		return
	}
	// Not json.Marshal: it would write each <, > and & of an agent's
	// output as six bytes (\u003c), and a result line is no HTML.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(res)
	if err == nil {
		w.mu.Lock()
		_, err = w.f.Write(b.Bytes())
		w.mu.Unlock()
	}
	if err != nil {
		w.mu.Lock()
		if w.first == nil {
			w.first = err
		}
		w.mu.Unlock()
	}
}

func (w *resultWriter) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

func (w *resultWriter) Close() error {
	if w.f == nil {
		return nil
	}
	return w.f.Close()
}

var _ io.Closer = (*resultWriter)(nil)

// interruptible returns a context that the first SIGINT/SIGTERM cancels
// with engine.ErrInterrupted (each step tears down with its graces); a
// second one sends SIGKILL to every agent's process group at once.
func interruptible(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
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
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}
