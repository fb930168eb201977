// Command acpflow-temporal runs acpflow workflows on Temporal: `worker`
// polls a task queue and runs steps; `run` submits runs (one, or one per
// line of --inputs) and writes their results as `acpflow run` does.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	_ "github.com/acpflow/acpflow/standard" // every step kind and policy form
	"github.com/acpflow/acpflow/temporal/backend"
	"github.com/acpflow/acpflow/temporal/builtin"
)

func main() {
	// A builtin agent, or the sandbox's launcher, is this executable
	// started again (builtin: demo; docs/sandbox.md).
	if served, code := builtin.Serve(os.Args[1:]); served {
		os.Exit(code)
	}
	os.Exit(cli.Main(newRootCmd(), "acpflow-temporal", os.Args[1:]))
}

// newRootCmd is the command tree; cli.Main runs it as it runs
// acpflow's, so that the same error exits with the same code.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "acpflow-temporal",
		Short:         "Run acpflow workflows on Temporal: workers on many machines, the same workflow file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var conn backend.Conn
	conn.Add(root)
	root.AddCommand(backend.NewWorkerCmd(&conn), backend.NewRunCmd(&conn),
		backend.NewApprovalsCmd(&conn), backend.NewApproveCmd(&conn))
	return root
}
