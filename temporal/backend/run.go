package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/temporal/client"
	"github.com/acpflow/acpflow/temporal/flow"
)

// temporalFlags are the flags run has on Temporal only.
type temporalFlags struct {
	heartbeat time.Duration
	id        string
}

// NewRunCmd is acpflow's run command (cli: the same flags, views, exit
// codes, --budget and --output) with the Temporal backend plugged in and
// no run store: Temporal keeps the runs.
func NewRunCmd(conn *Conn) *cobra.Command {
	var t temporalFlags
	return cli.New(cli.Config{
		Name: "acpflow-temporal",
		// Runs submitted and awaited at once: the workers' --concurrency
		// bounds the agents.
		Concurrency: 64,
		Flags:       t.add,
		Check:       t.check,
		Open: func(ctx context.Context, s cli.Setup) (*runs.Runner, func(), error) {
			return openTemporal(ctx, conn, &t, s)
		},
		Resume: func(string) string {
			return "the same command again takes its runs up on task queue " + conn.taskQueue
		},
		Interrupted: "interrupted: the runs go on on Temporal; the same command takes them up",
	})
}

func (t *temporalFlags) add(fl *pflag.FlagSet) {
	fl.DurationVar(&t.heartbeat, "heartbeat", flow.DefaultHeartbeat, "how long a worker may go silent before its steps move to another worker")
	fl.StringVar(&t.id, "id", "", "the run's id (a batch's runs get ID-LINE); default: derived from the file, workspace and inputs, so the same run submitted again is taken up")
}

// check refuses the flags of acpflow run that mean nothing on Temporal,
// and its own bad ones, before anything is read or dialled.
func (t *temporalFlags) check(f *cli.Flags) error {
	switch {
	case f.State != "":
		return errors.New("--state: on Temporal the runs are Temporal's workflow executions; there is no run store to name")
	case f.Policy != "":
		return errors.New("--policy: the outer policy is the workers' own (acpflow-temporal worker --policy FILE)")
	case f.Sandbox:
		return errors.New("--sandbox: on Temporal each worker loads the workflow file as written; set sandbox: on its agents (docs/sandbox.md)")
	case t.id != "" && !validID(t.id):
		return fmt.Errorf("--id %q: want 1 to %d letters, digits, '.', '_' or '-'", t.id, maxIDLen)
	case t.heartbeat < time.Second:
		return fmt.Errorf("--heartbeat must be at least 1s, got %s", t.heartbeat)
	}
	return nil
}

// openTemporal is the Runner of runs on Temporal: the workflow's bundle
// in the blob store, a client dialled, the Temporal backend.
func openTemporal(ctx context.Context, conn *Conn, t *temporalFlags, s cli.Setup) (*runs.Runner, func(), error) {
	blobs := flow.Blobs{Dir: conn.blobs}
	bundle, err := flow.NewBundle(blobs, s.File, s.Workflow)
	if err != nil {
		return nil, nil, cli.UsageError(err)
	}
	cl, err := conn.Dial()
	if err != nil {
		return nil, nil, &cli.ExitError{Code: cli.ExitFailed, Err: err}
	}
	warnWithoutWorkers(ctx, cl, conn.taskQueue)
	b := &temporalBackend{
		sub: &client.Submitter{Client: cl, TaskQueue: conn.taskQueue, Blobs: blobs}, blobs: blobs, id: t.id,
		json: s.Flags.JSON, cancel: func(ctx context.Context, workflowID string) error {
			return cl.CancelWorkflow(ctx, workflowID, "")
		},
		base: flow.Request{
			Bundle: bundle, Plan: flow.PlanOf(s.Workflow), Workspace: s.Workspace,
			Env: flow.EnvFor(s.Workflow, policies.EnvMap(os.Environ())), Timeout: s.Flags.Timeout, Heartbeat: t.heartbeat,
		},
	}
	// Events as they happen: a lone run's, and a metered batch's (its
	// budget counts what its runs spend as they spend it); an unmetered
	// batch's at each run's end (one query per run, not a poll of
	// thousands).
	switch {
	case s.Flags.InputsFile == "":
		b.poll = 250 * time.Millisecond
	case s.Flags.Budget != "":
		b.poll = time.Second
	}
	return &runs.Runner{Backend: b}, cl.Close, nil
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
// (taken up if it was submitted before) and awaited, its events told to
// the command's view and its usage to the batch's meter.
type temporalBackend struct {
	sub   *client.Submitter
	blobs flow.Blobs
	base  flow.Request
	id    string        // --id: the runs' ids; "": derived from what is run
	json  bool          // --json: events handed on as the workers wrote them
	poll  time.Duration // how often a run's events are asked for (0: at its end)
	// cancel cancels a workflow execution (the client's CancelWorkflow).
	cancel func(ctx context.Context, workflowID string) error
}

// Run implements runs.Backend: it submits the run (see runID) and waits
// for its outcome.
func (b *temporalBackend) Run(ctx context.Context, wf *engine.Workflow, req runs.Request) (*engine.RunResult, error) {
	r := b.base
	r.Inputs = req.Inputs
	r.RunID = b.runID(wf, req)
	sub := *b.sub
	sub.Poll = b.poll
	sub.Events = b.events(r.RunID, req)
	outcome, err := sub.Run(ctx, r)
	if err != nil {
		return nil, b.stopped(ctx, r.RunID, err)
	}
	res, err := outcome.Result(b.blobs, r.Workspace)
	if err == nil && res.Usage != nil && req.OnUsage != nil {
		req.OnUsage(r.RunID, &res.Usage.Usage)
	}
	return res, err
}

// events is the Submitter's hook for one run's event lines: each goes to
// the view (the lines as written with --json, else as the events they
// are), and what its steps spent to the meter.
func (b *temporalBackend) events(runID string, req runs.Request) func([]byte) {
	spent := &steps.Usage{}
	return func(line []byte) {
		e, raw, ok := decodeEvent(line)
		if !ok {
			return
		}
		if req.OnUsage != nil {
			if u := usageOf(e); u != nil {
				spent.Add(u)
				req.OnUsage(runID, spent.Clone())
			}
		}
		if req.Events == nil {
			return
		}
		if b.json {
			e.Data = raw
		}
		req.Events.Emit(e)
	}
}

// stopped is the error of a run no longer waited for. A run stopped by an
// interrupt goes on on Temporal (the same command takes it up); one
// stopped otherwise (the batch's budget exceeded) has its workflow
// execution cancelled, so that it spends no more.
func (b *temporalBackend) stopped(ctx context.Context, runID string, err error) error {
	err = fmt.Errorf("run %s: %w", runID, err)
	if ctx.Err() == nil || errors.Is(context.Cause(ctx), engine.ErrInterrupted) || b.cancel == nil {
		return err
	}
	cctx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	var notFound *serviceerror.NotFound
	if cerr := b.cancel(cctx, client.WorkflowID(runID)); cerr != nil && !errors.As(cerr, &notFound) {
		return fmt.Errorf("%w; cancelling its workflow execution: %v", err, cerr)
	}
	return fmt.Errorf("%w: its workflow execution is cancelled (%v)", err, context.Cause(ctx))
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
