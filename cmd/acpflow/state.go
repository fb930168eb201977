package main

import (
	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine/store"
)

func addStateFlag(cmd *cobra.Command, state *string) {
	cmd.Flags().StringVar(state, "state", "", "the run store (default: $ACPFLOW_STATE, else $XDG_STATE_HOME/acpflow/state.db, else ~/.local/state/acpflow/state.db)")
}

// openStore opens the run store at --state, or where docs/cli.md says.
func openStore(flag string) (*store.Store, error) {
	path := flag
	if path == "" {
		var err error
		if path, err = store.DefaultPath(); err != nil {
			return nil, err
		}
	}
	return store.Open(path)
}
