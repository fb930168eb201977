package main

import (
	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/workflows"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON schema of the workflow file (for editors: yaml-language-server)",
		Example: `  acpflow schema > workflow.schema.json
  # then, as a workflow file's first line:
  # yaml-language-server: $schema=workflow.schema.json`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			schema, err := workflows.Schema()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(schema)
			return err
		},
	}
}
