// Command acpflow-temporal runs acpflow workflows on Temporal: `worker`
// polls a task queue and runs steps; `run` submits runs (one, or one per
// line of --inputs) and writes their results as `acpflow run` does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/acpflow/acpflow/engine"
	_ "github.com/acpflow/acpflow/policies/wasmpolicy" // registers the `wasm:` policy form
	"github.com/acpflow/acpflow/steps"
	_ "github.com/acpflow/acpflow/steps/acpsubagent" // registers the acp-subagent step kind
	"github.com/acpflow/acpflow/temporal/builtin"
)

// Exit codes, as acpflow's (docs/results.md#exit-codes).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	// A builtin agent is this executable started again (builtin: demo).
	if served, code := builtin.Serve(os.Args[1:]); served {
		os.Exit(code)
	}
	root := &cobra.Command{
		Use:           "acpflow-temporal",
		Short:         "Run acpflow workflows on Temporal: workers on many machines, the same workflow file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var conn connFlags
	conn.add(root)
	root.AddCommand(newWorkerCmd(&conn), newRunCmd(&conn))
	err := root.Execute()
	if err == nil {
		os.Exit(exitOK)
	}
	var coded *codedError
	if errors.As(err, &coded) {
		if coded.err != nil {
			fmt.Fprintln(os.Stderr, "acpflow-temporal:", coded.err)
		}
		os.Exit(coded.code)
	}
	fmt.Fprintln(os.Stderr, "acpflow-temporal:", err)
	os.Exit(exitUsage)
}

type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return fmt.Sprint(e.err) }

// connFlags say where Temporal and the blob store are.
type connFlags struct {
	address, namespace, taskQueue, blobs string
}

func (c *connFlags) add(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&c.address, "address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "the Temporal frontend, HOST:PORT ($TEMPORAL_ADDRESS)")
	fl.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "the Temporal namespace ($TEMPORAL_NAMESPACE)")
	fl.StringVar(&c.taskQueue, "task-queue", "acpflow", "the task queue workers poll and runs are sent to")
	fl.StringVar(&c.blobs, "blobs", envOr("ACPFLOW_TEMPORAL_BLOBS", defaultBlobs()), "the blob directory the client and every worker share ($ACPFLOW_TEMPORAL_BLOBS)")
}

func (c *connFlags) dial() (sdkclient.Client, error) {
	cl, err := sdkclient.Dial(sdkclient.Options{
		HostPort: c.address, Namespace: c.namespace,
		Logger: log.NewStructuredLogger(quietLogger()),
	})
	if err != nil {
		return nil, fmt.Errorf("temporal at %s: %w", c.address, err)
	}
	return cl, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func defaultBlobs() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "acpflow", "temporal-blobs")
}

// interruptible is a context that SIGINT or SIGTERM cancels.
func interruptible() (context.Context, func()) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// resultWriter writes --output: one JSON result per run, one line each,
// in completion order, each line in a single write.
type resultWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (w *resultWriter) write(res *engine.RunResult) error {
	if w.w == nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(append(b, '\n'))
	return err
}

// events prints a run's end as acpflow run --json prints events: each
// step's step_end, then run_end. Temporal holds the run while it runs;
// its events are told when it ends.
func events(out io.Writer, mu *sync.Mutex, wf *engine.Workflow, res *engine.RunResult) {
	mu.Lock()
	defer mu.Unlock()
	enc := json.NewEncoder(out)
	now := time.Now()
	for _, st := range wf.Steps {
		sr := res.Steps[st.ID]
		if sr == nil {
			continue
		}
		enc.Encode(steps.Event{RunID: res.RunID, Step: st.ID, Time: now, Data: steps.StepEnd{
			Status: string(sr.Status), StopReason: sr.StopReason, Attempts: sr.Attempts, DurationMS: sr.DurationMS, Error: sr.Error, Usage: sr.Usage,
		}})
	}
	end := steps.RunEnd{Status: string(res.Status), DurationMS: res.DurationMS, Error: res.Error}
	if res.Usage != nil {
		end.Usage = &res.Usage.Usage
	}
	enc.Encode(steps.Event{RunID: res.RunID, Time: now, Data: end})
}

// quietLogger is the SDK's logger: warnings and errors only, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
