// Command acpflow runs declarative, multi-step AI-agent workflows: each
// acp-subagent step spawns an Agent Client Protocol agent, drives it as the
// client, answers its permission requests through a policy, and tears it
// down with nothing left behind.
//
// This package is the CLI only: flags, output rendering, exit codes.
package main

import (
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	_ "github.com/acpflow/acpflow/internal/prefault" // initialised early (it imports almost nothing): see the package
	"github.com/acpflow/acpflow/internal/procgroup"
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/internal/version"
	_ "github.com/acpflow/acpflow/standard" // every step kind and policy form
	"github.com/acpflow/acpflow/steps/confine"
)

func main() {
	// A sandboxed agent is started through this executable, as the
	// launcher that confines it (docs/sandbox.md): before anything else,
	// so that the spawn pays for nothing of the CLI's.
	if len(os.Args) > 1 && os.Args[1] == confine.Subcommand {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	os.Exit(cli.Main(newRootCmd(), "acpflow", os.Args[1:]))
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "acpflow",
		Short: "Run multi-step AI-agent workflows over the Agent Client Protocol",
		Example: `  acpflow run workflows/examples/hello.yaml     # the first run: offline, no key
  acpflow runs                                   # what ran
  acpflow show 20261202T180412-3f9a              # one run whole`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			// Orphans of the agents' process trees come back to acpflow, so
			// that teardown can find and kill them (see internal/procgroup).
			procgroup.EnableSubreaper()
		},
	}
	// --version prints what `acpflow version` does (cobra's own flag).
	root.Version = version.Version
	root.SetVersionTemplate("{{" + strconv.Quote(version.Line("acpflow")+"\n") + "}}")
	root.AddCommand(
		newRunCmd(),
		newValidateCmd(),
		newRunsCmd(),
		newShowCmd(),
		newExportCmd(),
		newResumeCmd(),
		newProbeCmd(),
		newPolicyCmd(),
		newAgentCmd(),
		newAgentsCmd(),
		newSchemaCmd(),
		newPromptCmd(),
		newVersionCmd(),
		newWorktreesCmd(),
		newApprovalsCmd(),
		newApproveCmd(),
		newUICmd(),
	)
	return root
}
