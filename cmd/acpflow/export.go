package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/regularfile"
	"github.com/acpflow/acpflow/runs"
)

func newExportCmd() *cobra.Command {
	var state, output string
	cmd := &cobra.Command{
		Use:   "export RUN_ID",
		Short: "Write a run's transcripts as a file that builtin: replay and policy test read",
		Long: `Write the transcripts of a recorded run (every ACP message of every step attempt,
with the steps' permission decisions) as one JSON file, to standard output or --output.
The file can be committed as a test fixture: builtin: replay plays it back (from: FILE)
and acpflow policy test re-decides its permission requests (--transcripts FILE).
It holds what the run store holds: secrets (credentials, MCP server values, the templated
parts of MCP server urls) were scrubbed before they were stored. See docs/transcripts.md.`,
		Example: `  acpflow export 20261202T180412-3f9a > review.transcript.json
  acpflow export 20261202T180412-3f9a -o testdata/review.transcript.json
  acpflow policy test workflows/examples/policies.yaml --transcripts testdata/review.transcript.json`,
		Args: cli.Args("see 'acpflow runs' for ids", "RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, id, kind, err := openRecorded(cmd.Context(), state, args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			if kind == runs.KindBatch {
				return cli.UsageErrorf("%s is a batch: export one of its runs (acpflow show %s lists them)", id, id)
			}
			f, err := s.Export(cmd.Context(), id)
			if err != nil {
				return err
			}
			if len(f.Steps) == 0 {
				return fmt.Errorf("run %s has no transcript: none of its steps talked to an agent, or it was recorded before transcripts were kept", id)
			}
			if output == "" || output == "-" {
				return f.Write(cmd.OutOrStdout())
			}
			// A private file (a transcript is what an agent saw), written
			// whole; only a new path or a regular file is replaced.
			err = regularfile.Write(output, func(fh *os.File) error { return f.Write(fh) })
			var nr *regularfile.NotReplacedError
			if errors.As(err, &nr) {
				return cli.UsageErrorf("--output: %v", err)
			}
			return err
		},
	}
	addStateFlag(cmd, &state)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the file here instead of standard output (created with mode 0600, replaced whole; only a new path or a regular file: a symlink or a device is refused)")
	return cmd
}
