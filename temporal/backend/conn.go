// Package backend is acpflow-temporal's Temporal backend: the run
// command that submits runs to a task queue and awaits them (runs.Backend),
// the worker that polls it, and the connection flags both share. The
// command's main only wires them into one tree.
package backend

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

// Conn says where Temporal and the blob store are: the flags every
// command of acpflow-temporal shares, and the client they dial.
type Conn struct {
	address, namespace, taskQueue, blobs string
}

// Add declares the connection flags on cmd, for it and its subcommands.
func (c *Conn) Add(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&c.address, "address", envOr("TEMPORAL_ADDRESS", "127.0.0.1:7233"), "the Temporal frontend, HOST:PORT ($TEMPORAL_ADDRESS)")
	fl.StringVar(&c.namespace, "namespace", envOr("TEMPORAL_NAMESPACE", "default"), "the Temporal namespace ($TEMPORAL_NAMESPACE)")
	fl.StringVar(&c.taskQueue, "task-queue", "acpflow", "the task queue workers poll and runs are sent to")
	fl.StringVar(&c.blobs, "blobs", envOr("ACPFLOW_TEMPORAL_BLOBS", defaultBlobs()), "the blob directory the client and every worker share ($ACPFLOW_TEMPORAL_BLOBS)")
}

// Dial connects to the Temporal frontend the flags name.
func (c *Conn) Dial() (sdkclient.Client, error) {
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
