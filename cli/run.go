// Package cli is the command line every acpflow binary shares: the `run`
// command (its flags, its views: live, plain lines, --json; --budget and
// --output) with the backend that runs the runs plugged in (runs.Local in
// acpflow, Temporal's in acpflow-temporal), Main's exit codes and usage
// errors, and the argument checks. It is here, not under runs/, so that
// runs prints nothing and links no cobra; it links no backend itself.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/workflows"
)

// Flags are run's flags, the same on every backend.
type Flags struct {
	Inputs      []string
	InputsFile  string
	Concurrency int
	Workspace   string
	State       string
	Output      string
	JSON        bool
	Timeout     time.Duration
	Budget      string
	Sandbox     bool
	Policy      string // an outer policy file
}

// The help of the flags other commands share with run.
const (
	StateHelp  = "the run store (default: $ACPFLOW_STATE, else $XDG_STATE_HOME/acpflow/state.db, else ~/.local/state/acpflow/state.db)"
	PolicyHelp = "an outer policy file, decided before the workflow's policies, which cannot loosen it; it stacks on /etc/acpflow/policy.yaml, the user's and $ACPFLOW_POLICY, and can only tighten them (docs/policies.md)"
)

// Config is what a binary plugs into run.
type Config struct {
	// Name begins what the command says on stderr ("acpflow").
	Name string
	// Concurrency is --concurrency's default.
	Concurrency int
	// Flags adds the backend's own flags (nil: none).
	Flags func(*pflag.FlagSet)
	// Check refuses, before anything is read or opened, what the backend
	// cannot do with f (nil: nothing). Its error is bad usage.
	Check func(f *Flags) error
	// Open is called once the workflow and its inputs are read, under the
	// command's signal ladder: the Runner the runs go through (its
	// Backend, Store and Outer set) and what ends it (nil: nothing).
	Open func(ctx context.Context, s Setup) (*runs.Runner, func(), error)
	// Resume says on stderr, when a batch starts, how to take it up if it
	// stops half-way.
	Resume func(batchID string) string
	// ResumeRun, when set, is the command that takes a run up again: the
	// summary of a run that failed or was interrupted ends with it.
	ResumeRun func(runID string) string
	// Interrupted is what the first signal makes the command say.
	Interrupted string
	// Asker, when set, is who answers a policy's ask for a lone run
	// watched at a terminal, writing its questions to w; nil: no one (the
	// policies' ask-fallback decides).
	Asker func(w io.Writer) policies.Asker
	// Warnings makes run print, on stderr before anything starts, the
	// warnings validate prints for the workflow (workflows.LoadWarnings:
	// what this machine's environment would likely fail on); they never
	// fail the run. False: none are printed.
	Warnings bool
}

// Setup is what Config.Open is given.
type Setup struct {
	File      string
	Workflow  *engine.Workflow
	Workspace string // absolute
	Flags     *Flags
}

// New is the run command on c's backend.
func New(c Config) *cobra.Command {
	var f Flags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow once, or once per input line (batch)",
		Example: strings.ReplaceAll(`  # the demo workflow, on the built-in demo agent: no key, offline
  acpflow run workflows/examples/hello.yaml

  # with an input, the result as a JSON line on stdout, the view on stderr
  acpflow run workflows/examples/hello.yaml -i who=Ada --output - | jq .outputs

  # a batch: one run per JSONL line, 2 at once, the results to a file
  printf '{"who":"Ada"}\n{"who":"Grace"}\n' |
    acpflow run workflows/examples/hello.yaml --inputs - -c 2 --output results.jsonl`, "acpflow ", c.Name+" "),
		Args: Args("the workflow file to run", "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, c, args[0], &f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.Inputs, "input", "i", nil, "one workflow input, KEY=VALUE (repeatable)")
	fl.StringVar(&f.InputsFile, "inputs", "", "batch: one run per line of a JSONL file of input objects (- for stdin)")
	fl.IntVarP(&f.Concurrency, "concurrency", "c", max(c.Concurrency, 1), "runs in flight at once in a batch")
	fl.StringVarP(&f.Workspace, "workspace", "w", "", "the run's workspace (default: the current directory)")
	fl.StringVar(&f.Budget, "budget", "", "batch: what all its runs may spend together, tokens=N and/or cost=AMOUNTCUR (e.g. tokens=100000,cost=5USD)")
	fl.BoolVar(&f.Sandbox, "sandbox", false, "confine every agent and shell step that sets no sandbox: as with sandbox: true (docs/sandbox.md)")
	AddOutputFlags(cmd, &f)
	DurationFlag(fl, &f.Timeout, "timeout", 0, "wall-clock limit for one run (e.g. 10m, or seconds)")
	if c.Flags != nil {
		c.Flags(fl)
	}
	return cmd
}

// AddOutputFlags adds the flags `run` and `resume` share.
func AddOutputFlags(cmd *cobra.Command, f *Flags) {
	fl := cmd.Flags()
	fl.StringVar(&f.State, "state", "", StateHelp)
	fl.StringVar(&f.Policy, "policy", "", PolicyHelp)
	fl.StringVarP(&f.Output, "output", "o", "", "write one JSON result object per run to FILE, one per line (- for stdout: the view then goes to stderr)")
	fl.BoolVar(&f.JSON, "json", false, "print the event stream as JSON lines instead of the human view")
}

// preflight judges wf where it is about to run, under the Runner's outer
// policy, before anything starts: a sandbox whose writable path leads into
// a denied one is bad usage (docs/sandbox.md); with warnings, what validate
// warns of is printed on w.
func preflight(w io.Writer, warnings bool, j *workflows.Judge, wf *engine.Workflow, workspace string, r *runs.Runner) error {
	check := steps.SandboxCheck{Workspace: workspace, Outer: r.Outer, Sandbox: wf.Sandbox, StateFiles: r.StateFiles()}
	if err := j.CheckSandboxes(check); err != nil {
		return UsageError(err)
	}
	if warnings {
		warn(w, j, r.Outer)
	}
	return nil
}

// warn prints on w what validate warns of (workflows.LoadJudged), judged
// in acpflow's environment under the Runner's outer policy.
func warn(w io.Writer, j *workflows.Judge, outer policies.Outer) {
	where := workflows.Environment{Ambient: policies.EnvMap(os.Environ()), Outer: outer, Root: os.Geteuid() == 0}
	for _, e := range j.Warnings(where) {
		fmt.Fprintln(w, termtext.Sanitize(e.Error()))
	}
}

// check refuses the flags that do not go together, before anything is
// read.
func (f *Flags) check(c Config) (engine.Budget, error) {
	switch {
	case f.Concurrency < 1:
		return engine.Budget{}, UsageErrorf("--concurrency must be at least 1, got %d", f.Concurrency)
	case f.InputsFile != "" && len(f.Inputs) > 0:
		return engine.Budget{}, UsageErrorf("--input and --inputs do not go together: put every input in the JSONL lines")
	case f.CheckOutput() != nil:
		return engine.Budget{}, f.CheckOutput()
	case f.Budget != "" && f.InputsFile == "":
		return engine.Budget{}, UsageErrorf("--budget is a batch's (with --inputs); a run's budget is the workflow's budget: key")
	}
	if c.Check != nil {
		if err := c.Check(f); err != nil {
			return engine.Budget{}, UsageError(err)
		}
	}
	if f.Budget == "" {
		return engine.Budget{}, nil
	}
	budget, err := engine.ParseBudget(f.Budget)
	if err != nil {
		return engine.Budget{}, UsageErrorf("--budget: %v", err)
	}
	return budget, nil
}

// loadRun is what run checks before anything starts, each failure bad
// usage: the flags (and --budget), the workflow file, judged, with
// --sandbox applied, and the workspace with, for isolated steps, its git
// checkout.
func loadRun(ctx context.Context, c Config, file string, f *Flags) (wf *engine.Workflow, judge *workflows.Judge, workspace string, budget engine.Budget, err error) {
	if budget, err = f.check(c); err != nil {
		return nil, nil, "", budget, err
	}
	if wf, judge, err = workflows.LoadJudged(file); err != nil {
		return nil, nil, "", budget, UsageError(err)
	}
	if f.Sandbox {
		sandboxAgents(wf)
	}
	if workspace, err = runs.ResolveWorkspace(f.Workspace); err != nil {
		return nil, nil, "", budget, UsageError(err)
	}
	// Before anything starts: git there, a repository, each base, a
	// clean checkout (isolation: worktree, docs/worktrees.md).
	if err := runs.PreflightWorktrees(ctx, wf, workspace); err != nil {
		return nil, nil, "", budget, UsageError(err)
	}
	return wf, judge, workspace, budget, nil
}

// run is the run command: one run, or a batch with --inputs, on the
// backend c opens, watched by the view the flags choose.
func run(cmd *cobra.Command, c Config, file string, f *Flags) error {
	wf, judge, workspace, budget, err := loadRun(cmd.Context(), c, file, f)
	if err != nil {
		return err
	}
	ri, err := readInputs(wf, f)
	if err != nil {
		return err
	}
	if ri.in != nil {
		defer ri.in.Close()
	}
	out, err := f.OpenOutput(cmd)
	if err != nil {
		return err
	}
	defer out.Close()

	ctx, stop := Interruptible(cmd.Context(), c.Name, c.Interrupted)
	defer stop()
	r, end, err := c.Open(ctx, Setup{File: file, Workflow: wf, Workspace: workspace, Flags: f})
	if err != nil {
		return err
	}
	if end != nil {
		defer end()
	}
	if err := preflight(cmd.ErrOrStderr(), c.Warnings, judge, wf, workspace, r); err != nil {
		return err
	}
	x := NewExecutor(c.Name, r, out, f.Timeout)
	x.ResumeHint = c.ResumeRun
	endTraces, err := x.StartTraces(ctx)
	if err != nil {
		return err
	}
	defer endTraces()
	if ri.lines != nil {
		b := runs.NewBatch(wf, workspace, f.InputsFile, f.Concurrency, ri.first)
		b.Budget, r.Budget = budget.String(), budget
		x.SetView(NewBatchView(f.ViewOut(cmd), f.JSON, b.ID, 0))
		r.BatchStarted = c.batchStarted(x)
		if err := r.Batch(ctx, wf, b, ri.lines, ri.in.regular, f.Concurrency); err != nil {
			if err := r.StoreOpenErr(); err != nil {
				return UsageError(err)
			}
			x.ReportStoreErrs()
			return RunError(err)
		}
		return x.Exit(ctx, nil)
	}
	x.SetView(NewView(f.ViewOut(cmd), f.JSON))
	if c.Asker != nil && !f.JSON {
		// A person answers at the terminal only when one run is watched:
		// not with --json (a program reads it), not in a batch.
		if a := c.Asker(x.Questions()); a != nil {
			r.Asker = a
		}
	}
	res := r.Run(ctx, wf, runs.Spec{Inputs: ri.inputs, Workspace: workspace})
	if err := r.StoreOpenErr(); err != nil {
		// The store could not record the run: its agent was stopped
		// before it was asked anything (runs.OpenAsync).
		return UsageError(err)
	}
	return x.Exit(ctx, []*engine.RunResult{res})
}

// sandboxAgents is --sandbox: every agent the file leaves without a
// sandbox: key, and every step that names no agent and sets no
// with.sandbox (a shell step), runs sandboxed, with the network on.
func sandboxAgents(wf *engine.Workflow) {
	for _, a := range wf.Agents {
		if a.Sandbox == nil && !a.SandboxSet {
			a.Sandbox = &steps.Sandbox{Network: steps.NetworkOn}
		}
	}
	if wf.Sandbox == nil {
		wf.Sandbox = &steps.Sandbox{Network: steps.NetworkOn}
	}
}

// runInputs is what a run starts from: the inputs of one run, or, with
// --inputs, the open JSONL file and its first line, read already.
type runInputs struct {
	inputs map[string]any
	in     *batchInput // nil without --inputs; the caller closes it
	lines  *runs.LineReader
	first  runs.BatchLine
}

// readInputs reads the inputs before anything is recorded: the --input
// flags against the workflow's inputs, or the first line of --inputs,
// since an input with no line at all is bad usage, and nothing starts.
func readInputs(wf *engine.Workflow, f *Flags) (runInputs, error) {
	var ri runInputs
	if f.InputsFile == "" {
		given, err := workflows.ParseInputFlags(wf, f.Inputs)
		if err != nil {
			return ri, UsageError(err)
		}
		if ri.inputs, err = workflows.ResolveInputs(wf, given); err != nil {
			return ri, UsageError(err)
		}
		return ri, nil
	}
	in, err := openInputs(f.InputsFile, fifoWriterWait)
	if err != nil {
		return ri, UsageError(err)
	}
	lines := runs.NewLineReader(in, f.InputsFile)
	first, err := lines.Next()
	if errors.Is(err, io.EOF) {
		in.Close()
		return ri, UsageErrorf("--inputs %s: no input lines", f.InputsFile)
	} else if err != nil {
		in.Close()
		return ri, UsageError(err)
	}
	return runInputs{in: in, lines: lines, first: first}, nil
}

// batchStarted tells the person at the terminal that a batch has started:
// its id, how many runs (or that they come as lines do), and how to
// resume it; and gives the view the total.
func (c Config) batchStarted(x *Executor) func(runs.Batch, int) {
	return func(b runs.Batch, total int) {
		hint := ""
		if c.Resume != nil {
			hint = " (if it stops half-way: " + c.Resume(b.ID) + ")"
		}
		if total < 0 {
			fmt.Fprintf(os.Stderr, "%s: batch %s: a run per line as they come%s\n", c.Name, b.ID, hint)
			return
		}
		fmt.Fprintf(os.Stderr, "%s: batch %s: %d runs%s\n", c.Name, b.ID, total, hint)
		SetTotal(x.View, total)
	}
}

// CheckOutput refuses an --output that cannot go with the other flags:
// `--output -` puts the results on stdout, where --json puts the events.
func (f *Flags) CheckOutput() error {
	if f.Output == "-" && f.JSON {
		return UsageErrorf("--output - and --json both write to stdout: give --output a file, or drop --json")
	}
	return nil
}

// OpenOutput is the --output of cmd: the file f.Output names, appended to;
// with "-", cmd's stdout, as `-` means to gh, kubectl and jq.
func (f *Flags) OpenOutput(cmd *cobra.Command) (*runs.Output, error) {
	if f.Output == "-" {
		return runs.WriteTo(cmd.OutOrStdout()), nil
	}
	out, err := runs.OpenOutput(f.Output)
	if err != nil {
		return nil, UsageError(err)
	}
	return out, nil
}

// ViewOut is where cmd's view (live, plain or --json) and what it says of
// the runs go: stdout, unless `--output -` has the results there, so that
// stdout holds JSON alone and the view goes to stderr.
func (f *Flags) ViewOut(cmd *cobra.Command) io.Writer {
	if f.Output == "-" {
		return cmd.ErrOrStderr()
	}
	return cmd.OutOrStdout()
}

// Executor is one command's runs: the run service's Runner, with the
// command's view and --output.
type Executor struct {
	Runner *runs.Runner
	Out    *runs.Output
	View   View
	// ResumeHint, when set, is the command that takes a run up again,
	// which the view's summary of a run that did not succeed ends with.
	ResumeHint func(runID string) string
	name       string
}

// NewExecutor sets r up for a command named name: its results go to out,
// its notices to stderr.
func NewExecutor(name string, r *runs.Runner, out *runs.Output, timeout time.Duration) *Executor {
	r.Timeout = timeout
	r.Ambient = policies.EnvMap(os.Environ())
	r.Result = out.Write
	r.Notice = func(msg string) { fmt.Fprintln(os.Stderr, name+": "+termtext.Sanitize(msg)) }
	return &Executor{Runner: r, Out: out, name: name}
}

// SetView makes v the view of the runs' events.
func (x *Executor) SetView(v View) {
	x.View = v
	x.Runner.Events = v
}

// Questions is where a person's questions are written: through the view,
// so that they do not tear its lines.
func (x *Executor) Questions() io.Writer {
	if q, ok := x.View.(interface{ questions() io.Writer }); ok {
		return q.questions()
	}
	return os.Stdout
}

// ReportStoreErrs warns of every store error kept, once.
func (x *Executor) ReportStoreErrs() {
	errs, more := x.Runner.StoreErrors()
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "%s: warning: the run store could not record everything: %s\n", x.name, termtext.Sanitize(err.Error()))
	}
	if more > 0 {
		fmt.Fprintf(os.Stderr, "%s: warning: and %d more errors of the run store\n", x.name, more)
	}
}

// RunError is the error of a run service call that did not run: a request
// that was invalid as given exits 2, anything else 1.
func RunError(err error) error {
	var inv *runs.InvalidError
	if errors.As(err, &inv) {
		return UsageError(err)
	}
	return AsFailure(err)
}

// AsFailure keeps an error's exit code if it has one, else makes it exit 1:
// a store that fails is not bad usage.
func AsFailure(err error) error {
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitFailed, Err: err}
}

// Exit ends the command: the view's summary, then the exit code of
// docs/results.md#exit-codes. results are the runs the view's summary
// shows (a batch's view counts its own).
func (x *Executor) Exit(ctx context.Context, results []*engine.RunResult) error {
	if v, ok := x.View.(interface{ setResume(func(string) string) }); ok && x.ResumeHint != nil {
		v.setResume(x.ResumeHint)
	}
	x.View.Close(results)
	x.ReportStoreErrs()
	if err := x.Out.Err(); err != nil {
		return &ExitError{Code: ExitFailed, Err: fmt.Errorf("--output: %w", err)}
	}
	if errors.Is(context.Cause(ctx), engine.ErrInterrupted) {
		return Outcome(ExitInterrupted)
	}
	if x.Runner.Failures() > 0 {
		return Outcome(ExitFailed)
	}
	return nil
}

// Interruptible is the run service's signal ladder (runs.Interruptible),
// saying on stderr, as name, what the first signal does.
func Interruptible(parent context.Context, name, says string) (context.Context, func()) {
	return runs.Interruptible(parent, func() {
		fmt.Fprintln(os.Stderr, name+": "+says)
	})
}

// StartTraces makes the runs export their traces when the outer policy's
// telemetry: or the OTEL_* variables ask for it (docs/traces.md). The
// func returned sends what is queued, within trace.ShutdownTimeout, and
// warns once on stderr of the spans the collector did not get: the runs'
// results and exit code never depend on it.
func (x *Executor) StartTraces(ctx context.Context) (func(), error) {
	cfg, ok := trace.Configure(x.Runner.Outer.Telemetry(), os.Getenv)
	if !ok {
		return func() {}, nil
	}
	// Not cancelled with the runs: an interrupted run's trace still goes.
	t, err := trace.New(context.WithoutCancel(ctx), cfg, os.Getenv)
	if err != nil {
		return nil, UsageError(err)
	}
	x.Runner.Traces = t
	return func() {
		if msg := t.Close(); msg != "" {
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", x.name, termtext.Sanitize(msg))
		}
	}, nil
}
