package main

import (
	"slices"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/suggest"
)

// runStatuses are the words of `runs --status`: a recorded run's statuses.
var runStatuses = []string{
	string(engine.StatusRunning), string(engine.StatusWaiting), string(engine.StatusSucceeded), string(engine.StatusFailed), string(engine.StatusCancelled),
}

// checkWord refuses a flag's value that is not one of the words it takes
// (exit 2, with the likely fix and the list), where the command would
// otherwise find nothing and say nothing: `runs --status faild` printing an
// empty table. "" is the flag unset.
func checkWord(what, value string, known []string) error {
	if value == "" || slices.Contains(known, value) {
		return nil
	}
	return cli.UsageErrorf("%s", suggest.Unknown(what, value, known))
}

// group makes cmd, a command of subcommands only, refuse a word that names
// none of them (exit 2, with the closest) rather than print its help and
// exit 0 as if it had done what was asked; alone, it prints its help.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return cli.ArgsError(c, suggest.Unknown("command", args[0], names))
	}
	return cmd
}
