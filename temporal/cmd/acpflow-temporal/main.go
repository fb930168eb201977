// Command acpflow-temporal runs acpflow workflows on Temporal: `worker`
// polls a task queue and runs steps; `run` submits runs (one, or one per
// line of --inputs) and writes their results as `acpflow run` does.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/acpflow/acpflow/runs/runcmd"
	_ "github.com/acpflow/acpflow/standard" // every step kind and policy form
	"github.com/acpflow/acpflow/temporal/builtin"
)

func main() {
	// A builtin agent, or the sandbox's launcher, is this executable
	// started again (builtin: demo; docs/sandbox.md).
	if served, code := builtin.Serve(os.Args[1:]); served {
		os.Exit(code)
	}
	os.Exit(runcmd.Main(newRootCmd(), "acpflow-temporal", os.Args[1:]))
}

// newRootCmd is the command tree; runcmd.Main runs it as it runs
// acpflow's, so that the same error exits with the same code.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "acpflow-temporal",
		Short:         "Run acpflow workflows on Temporal: workers on many machines, the same workflow file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var conn connFlags
	conn.add(root)
	root.AddCommand(newWorkerCmd(&conn), newRunCmd(&conn), newApprovalsCmd(&conn), newApproveCmd(&conn))
	return root
}

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

// quietLogger is the SDK's logger: warnings and errors only, on stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
