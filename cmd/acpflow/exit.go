package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/runs/runcmd"
)

// exitCode is the code an error exits with: its own, else 1. Exit codes
// are API (docs/results.md#exit-codes): runcmd defines them, and
// *runcmd.ExitError carries them from where an error is found. Usage errors
// carry runcmd.ExitUsage from where they are found, cobra's included (see
// usageArgs and the root's flag error function); an error nobody coded is a
// failure, not bad usage.
func exitCode(err error) int {
	var ce *runcmd.ExitError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return runcmd.ExitFailed
}

// usageArgs makes the argument check of cmd and of each of its
// subcommands (cobra's Args validators: a wrong argument count) return a
// usage error; one that is coded already (runcmd.Args) keeps its code.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				var coded *runcmd.ExitError
				if errors.As(err, &coded) {
					return err
				}
				return runcmd.UsageError(err)
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// unknownCommand makes the error of a command line that names no command a
// usage error. The root runs nothing itself, so the only error that comes
// back naming it is cobra's check that its first word is a command (which
// cobra runs while finding the command, before any Args validator); its
// flag errors are coded already (SetFlagErrorFunc).
func unknownCommand(root, ran *cobra.Command, err error) error {
	var ce *runcmd.ExitError
	if ran == root && !errors.As(err, &ce) {
		return runcmd.UsageError(err)
	}
	return err
}

// flagError is the usage error of a command line whose flags c could not
// parse: an unknown --flag gets the closest flag of c, as an unknown key
// or command does ("unknown flag: --inptu; did you mean --input?"); cobra
// suggests commands only.
func flagError(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedShortnames() != "" {
		return runcmd.UsageError(err)
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if s := suggest.Closest(ne.GetSpecifiedName(), names); s != "" {
		return runcmd.UsageError(fmt.Errorf("%w; did you mean --%s?", err, s))
	}
	return runcmd.UsageError(fmt.Errorf("%w (%s --help lists its flags)", err, c.CommandPath()))
}

func isSilent(err error) bool {
	var ce *runcmd.ExitError
	return errors.As(err, &ce) && ce.Silent
}
