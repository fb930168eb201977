package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Args is the argument check of every command of an acpflow binary, so
// that a missing or extra argument is told the same way everywhere, by
// its name and where to find one, as gh and kubectl tell it:
//
//	acpflow show: missing RUN_ID (see 'acpflow runs' for ids)
//	usage: acpflow show RUN_ID [flags]
//
// rather than cobra's "accepts 1 arg(s), received 0". names are the
// arguments as the command's Use line writes them: "RUN_ID" is required,
// "[NAME]" optional (after the required ones), and "FILE..." (last) one or
// more ("[FILE...]": any number). No names: the command takes none. hint,
// when not "", says where a missing argument comes from.
//
// The error exits 2 (bad usage) and is already reported: the check writes
// both lines to the command's stderr itself, so that the message begins
// with the command's own path rather than the binary's prefix alone.
func Args(hint string, names ...string) cobra.PositionalArgs {
	required, most := 0, len(names)
	for _, n := range names {
		if strings.HasSuffix(strings.TrimSuffix(n, "]"), "...") {
			most = -1
		}
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) < required:
			msg := "missing " + strings.TrimSuffix(names[len(args)], "...")
			if hint != "" {
				msg += " (" + hint + ")"
			}
			return ArgsError(c, msg)
		case most >= 0 && len(args) > most:
			takes := "no arguments"
			if most > 0 {
				takes = strings.Join(names, " ")
			}
			return ArgsError(c, fmt.Sprintf("unexpected argument %q (it takes %s)", args[most], takes))
		}
		return nil
	}
}

// ArgsError reports msg, an argument of c that is wrong, with c's usage
// line, on c's stderr, and is the silent usage error that says it was
// reported (see Args).
func ArgsError(c *cobra.Command, msg string) error {
	msg = c.CommandPath() + ": " + msg
	usage := c.UseLine()
	if c.HasAvailableSubCommands() {
		usage = c.CommandPath() + " COMMAND"
	}
	fmt.Fprintf(c.ErrOrStderr(), "%s\nusage: %s\n", msg, usage)
	return &ExitError{Code: ExitUsage, Err: errors.New(msg), Silent: true}
}
