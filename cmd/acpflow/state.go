package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/runs"
)

func addStateFlag(cmd *cobra.Command, state *string) {
	cmd.Flags().StringVar(state, "state", "", cli.StateHelp)
}

// openStore opens the run service over the run store at --state, or where
// docs/cli.md says.
func openStore(flag string) (*runs.Service, error) {
	return runs.Open(flag)
}

// openRecorded opens the run store at flag and resolves ref, a run or
// batch id or a unique prefix of one (show, export, resume). Its errors
// are bad usage; on success the caller closes the store.
func openRecorded(ctx context.Context, flag, ref string) (s *runs.Service, id, kind string, err error) {
	if s, err = openStore(flag); err != nil {
		return nil, "", "", cli.UsageError(err)
	}
	if id, kind, err = s.ResolveID(ctx, ref); err != nil {
		s.Close()
		return nil, "", "", cli.UsageError(err)
	}
	return s, id, kind, nil
}
