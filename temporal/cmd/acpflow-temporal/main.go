// Command acpflow-temporal runs acpflow workflows on Temporal: `worker`
// polls a task queue and runs steps; `run` submits runs (one, or one per
// line of --inputs) and writes their results as `acpflow run` does.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	_ "github.com/acpflow/acpflow/standard" // every step kind and policy form
	"github.com/acpflow/acpflow/temporal/builtin"
)

// Exit codes, as acpflow's (docs/results.md#exit-codes).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	// A builtin agent, or the sandbox's launcher, is this executable
	// started again (builtin: demo; docs/sandbox.md).
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

// eventView prints the events of runs (flow.EventsQuery): with --json
// each line as acpflow run --json prints it, else a line per step's start
// and end and the run's end, as acpflow run's plain view.
type eventView struct {
	out  io.Writer
	mu   *sync.Mutex
	json bool
}

func (v *eventView) line(line []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.json {
		v.out.Write(append(append([]byte(nil), line...), '\n'))
		return
	}
	var e struct {
		Type       string `json:"type"`
		RunID      string `json:"run_id"`
		Step       string `json:"step"`
		Status     string `json:"status"`
		StopReason string `json:"stop_reason"`
		DurationMS int64  `json:"duration_ms"`
		Error      string `json:"error"`
		Attempt    int    `json:"attempt"`
		AfterMS    int64  `json:"after_ms"`
		Kind       string `json:"kind"`
	}
	if json.Unmarshal(line, &e) != nil {
		return
	}
	took := time.Duration(e.DurationMS) * time.Millisecond
	switch e.Type {
	case "step_start":
		if e.Attempt > 1 {
			fmt.Fprintf(v.out, "[%s] attempt %d\n", e.Step, e.Attempt)
		} else {
			fmt.Fprintf(v.out, "[%s] started\n", e.Step)
		}
	case "step_update":
		if e.Kind != "retry" {
			return
		}
		fmt.Fprintf(v.out, "[%s] retrying in %s: %s\n", e.Step, time.Duration(e.AfterMS)*time.Millisecond, e.Error)
	case "step_end":
		switch {
		case e.Status == "skipped":
			fmt.Fprintf(v.out, "[%s] skipped: %s\n", e.Step, e.Error)
		case e.Error != "":
			fmt.Fprintf(v.out, "[%s] %s in %s (%s): %s\n", e.Step, e.Status, took, e.StopReason, e.Error)
		default:
			fmt.Fprintf(v.out, "[%s] %s in %s (%s)\n", e.Step, e.Status, took, e.StopReason)
		}
	case "run_end":
		if e.Error != "" {
			fmt.Fprintf(v.out, "run %s %s in %s: %s\n", e.RunID, e.Status, took, e.Error)
		} else {
			fmt.Fprintf(v.out, "run %s %s in %s\n", e.RunID, e.Status, took)
		}
	}
}

// quietLogger is the SDK's logger: warnings and errors only, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
